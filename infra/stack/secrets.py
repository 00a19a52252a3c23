"""Secret references: their Pulumi Outputs, their checks (set, secure, ciphertext); never plain text."""
from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Callable, Iterable
from typing import Any

from infra.stack.config import Deployment, SecretRef
from infra.errors import Problem, SecretError
from infra.stack.problems import closest, did_you_mean, key_text
from infra.stack.secretfix import set_secret

# What `pulumi config set --secret` writes. Passphrase and cloud (awskms://, gcpkms://, azurekeyvault://,
# hashivault://) providers: v1:BASE64(12-byte nonce):BASE64(AES-256-GCM ciphertext and 16-byte tag)
# (sdk/go/common/resource/config/crypt.go, which refuses any other nonce size); Pulumi Cloud: BASE64(the
# service's ciphertext) (pkg/secrets/service/manager.go), with no prefix.
V1_CIPHERTEXT = re.compile(r"^v1:([A-Za-z0-9+/]+={0,2}):([A-Za-z0-9+/]+={0,2})$")
BASE64 = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")
# A plain config value under a key with one of these in its name is a secret written in plain text.
SECRETISH = ("key", "secret", "token", "password", "passphrase")
# A secret's value for the CLI, (reference, field path) -> value; the caller chooses how it is read
# (infra.lifecycle.secrets.resolver: env, or the Pulumi CLI), so the rooms below never run Pulumi.
Resolve = Callable[[SecretRef, str], str]


# Characters an API key may hold: what the auth proxies match literally and every engine reads back unchanged.
API_KEY_CHARS = re.compile(r"^[A-Za-z0-9._~+/=-]+$")


def api_key_problem(value: str) -> str | None:
    """Why clients or an engine would not read this API key back unchanged, or None when they would."""
    if not API_KEY_CHARS.fullmatch(value):
        return "holds characters other than letters, digits and . _ ~ + / = -"
    if value.startswith("-"):  # an engine's argparse reads `--api-key -x...` as a flag, not as its value
        return "begins with '-', which an engine's command line reads as an option"
    return None


KEY_BITS = 128  # the least randomness a key at the edge may have (a guessed key is a stolen endpoint)
_HEX = set("0123456789abcdefABCDEF")


def key_bits(value: str) -> float:
    """An upper bound of the key's randomness in bits: its length times log2 of the alphabet its characters
    come from (hex when they are all hex digits, dashes not counted: `openssl rand -hex 32` is 256), where a run
    of one character counts at most three times (`sk-` + "7" * 24 is a short key, not a long one)."""
    import itertools
    import math

    length = sum(min(len(list(run)), 3) for ch, run in itertools.groupby(value) if ch != "-" or not _hexish(value))
    if _hexish(value):
        return length * 4.0
    pool = sum(n for chars, n in ((str.islower, 26), (str.isupper, 26), (str.isdigit, 10))
               if any(chars(c) for c in value)) + (7 if any(c in "._~+/=-" for c in value) else 0)
    return length * math.log2(max(pool, 2))


def _hexish(value: str) -> bool:
    return set(value) <= _HEX | {"-"}


def weak_key_problem(value: str) -> str | None:
    """Why this key is too weak for the gateway's edge, or None."""
    bits = key_bits(value)
    if bits < KEY_BITS or len(set(value)) < 8:
        return f"has about {int(bits)} bits of randomness at most; the gateway takes keys of {KEY_BITS} or more"
    return None


def checked_edge_key(value: str, field: str) -> str:
    """The key unchanged; SecretError naming the field when it is malformed or too weak for the edge."""
    why = api_key_problem(value) or weak_key_problem(value)
    if why:
        raise SecretError(f"the API key {why}", "generate a new one with `openssl rand -hex 32` and set it "
                          "again", where=field)
    return value


def checked_api_key(value: str) -> str:
    """The key unchanged; SecretError naming serving.api_key (never the value) when api_key_problem finds one."""
    why = api_key_problem(value)
    if why:
        raise SecretError(f"the API key {why}", "generate a new one, e.g. `openssl rand -hex 32`, and set it "
                          "again", where="serving.api_key")
    return value


def env_value(name: str, field: str) -> str:
    """An environment variable's value; SecretError (with the export that fixes it) when it is unset or empty."""
    value = os.environ.get(name)
    if not value:
        raise SecretError(f"environment variable {name} is not set", f"export {name}=...", where=field)
    return value


def output(ref: SecretRef, field: str):
    """The secret as a Pulumi secret Output, for the program."""
    import pulumi

    if ref.config:
        return pulumi.Config("inferry").require_secret(ref.config)
    return pulumi.Output.secret(env_value(ref.env or "", field))


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
