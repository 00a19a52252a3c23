"""Resolve secret references: environment variables or Pulumi secret config, never plain text."""
from __future__ import annotations

import base64
import binascii
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from infra.stack.config import Deployment, SecretRef
from infra.errors import Problem, PulumiMissingError, SecretError
from infra.stack.problems import closest, did_you_mean, key_text
from infra.stack.secretfix import set_secret
from infra.lifecycle.pulumicli import INSTALL, cli_env

# What `pulumi config set --secret` writes. Passphrase and cloud (awskms://, gcpkms://, azurekeyvault://,
# hashivault://) providers: v1:BASE64(12-byte nonce):BASE64(AES-256-GCM ciphertext and 16-byte tag)
# (sdk/go/common/resource/config/crypt.go, which refuses any other nonce size); Pulumi Cloud: BASE64(the
# service's ciphertext) (pkg/secrets/service/manager.go), with no prefix.
V1_CIPHERTEXT = re.compile(r"^v1:([A-Za-z0-9+/]+={0,2}):([A-Za-z0-9+/]+={0,2})$")
BASE64 = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")
# A plain config value under a key with one of these in its name is a secret written in plain text.
SECRETISH = ("key", "secret", "token", "password", "passphrase")


def resolve(ref: SecretRef, stack_name: str, field: str, stack_file: Path | None = None) -> str:
    """The secret's value for the CLI; SecretError says where it was looked for and how to set it."""
    if ref.env:
        value = os.environ.get(ref.env)
        if not value:
            raise SecretError(f"environment variable {ref.env} is not set", f"export {ref.env}=...", where=field)
        return value
    return _pulumi_config_get(ref.config, stack_name, field, stack_file)


def _pulumi_config_get(key: str, stack_name: str, field: str, stack_file: Path | None) -> str:
    exe = shutil.which("pulumi")
    if exe is None:
        raise PulumiMissingError(f"reading secret inferry:{key} needs the Pulumi CLI, which is not installed",
                                 f"{INSTALL}; or reference an environment variable: {{env: NAME}}", where=field)
    cmd = [exe, "config", "get", f"inferry:{key}", "--stack", stack_name]
    if stack_file is not None:
        cmd += ["--config-file", str(stack_file)]
    from infra.stack.project import project_root

    root = project_root()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=root, check=False,
                          env={**os.environ, **cli_env(root, os.environ)})
    if proc.returncode != 0:
        # Pulumi's message names the key and the problem (passphrase, stack); it never holds the value.
        raise SecretError(f"could not read secret inferry:{key}: {proc.stderr.strip()[:300]}",
                          "set PULUMI_CONFIG_PASSPHRASE and check the stack name", where=field)
    return proc.stdout.rstrip("\n")


def output(ref: SecretRef, field: str):
    """The secret as a Pulumi secret Output, for the program."""
    import pulumi

    if ref.config:
        return pulumi.Config("inferry").require_secret(ref.config)
    value = os.environ.get(ref.env or "")
    if not value:
        raise SecretError(f"environment variable {ref.env} is not set", f"export {ref.env}=...", where=field)
    return pulumi.Output.secret(value)


def is_secure(value: Any) -> bool:
    """Whether a stack-file config value is a `secure:` value (its form is ciphertext_problems' finding)."""
    return isinstance(value, dict) and set(value) == {"secure"}


def reference_problems(d: Deployment, stack: str, secure: Callable[[str], bool],
                       exists: Callable[[str], bool], known: Iterable[str] = ()) -> list[Problem]:
    """Every {config: KEY} reference must name a `secure:` value of this stack (known: the inferry keys set,
    for a did-you-mean)."""
    problems = []
    for path, ref in d.secret_refs().items():
        if ref.config is None:
            continue
        fix = set_secret(stack, ref.config)
        if not exists(ref.config):
            guess = closest(ref.config, set(known) - {"deployment"})
            hint = f"did you mean {{config: {guess}}}? otherwise {fix}" if guess else fix
            problems.append(Problem(path, f"secret inferry:{ref.config} is not set", hint=hint))
        elif not secure(ref.config):
            problems.append(Problem(f"inferry:{ref.config}", f"secret for {path} is written in plain text",
                                    hint=f"remove the plain value from the file; then {fix}"))
    return problems


def plain_text_problems(values: dict[str, Any], referenced: set[str], stack: str) -> list[Problem]:
    """Plain values under secret-looking inferry keys, and stray inferry keys (referenced ones are
    reference_problems' to report)."""
    problems = []
    for key, value in values.items():
        if is_secure(value) or key in referenced:
            continue
        name = f"inferry:{key_text(key)}"
        if any(s in key.lower() for s in SECRETISH):
            problems.append(Problem(name, "looks like a secret but is written in plain text",
                                    hint=f"remove it from the file; then {set_secret(stack, key_text(key))}"))
        else:
            problems.append(Problem(name, "unknown config key", hint=did_you_mean(key, {"deployment"})))
    return problems


def _decoded_len(text: str) -> int:
    try:
        return len(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError):
        return -1


def is_ciphertext(text: str, v1_only: bool) -> bool:
    """Whether text has the form of Pulumi ciphertext (v1_only: the stack has a passphrase or cloud provider).

    A form check, not decryption: it refuses words, sentences and short strings; a long base64 plain text
    could pass where Pulumi Cloud's form is allowed.
    """
    v1 = V1_CIPHERTEXT.match(text)
    if v1:  # what Pulumi can open: a 12-byte nonce, and at least the 16-byte GCM tag
        return _decoded_len(v1[1]) == 12 and _decoded_len(v1[2]) >= 16
    return not v1_only and len(text) >= 24 and bool(BASE64.match(text)) and _decoded_len(text) >= 16


def ciphertext_problems(values: dict[str, Any], stack: str, v1_only: bool) -> list[Problem]:
    """Every `secure:` value among inferry's config values that is not ciphertext (plain text put there by
    hand); the value is never echoed."""
    form = "v1:NONCE:CIPHERTEXT" if v1_only else "v1:NONCE:CIPHERTEXT or base64"
    problems = []
    for key, value in values.items():
        if not is_secure(value) or (isinstance(value["secure"], str) and is_ciphertext(value["secure"], v1_only)):
            continue
        name = f"inferry:{key_text(key)}"
        problems.append(Problem(name, f"the secure: value is not Pulumi ciphertext (expected {form}, as `pulumi "
                                "config set --secret` writes it)", hint=f"delete it from the file; then "
                                f"{set_secret(stack, key_text(key))}"))
    return problems
