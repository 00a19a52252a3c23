"""Secret values for the CLI: an environment variable, or a Pulumi secret read with the Pulumi CLI."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from infra.errors import PulumiMissingError, SecretError
from infra.lifecycle.pulumicli import INSTALL, cli_env
from infra.stack.config import SecretRef
from infra.stack.secrets import Resolve, env_value
from infra.stack.stackfile import Stack


def resolve(ref: SecretRef, stack_name: str, field: str, stack_file: Path | None = None) -> str:
    """The secret's value for the CLI; SecretError says where it was looked for and how to set it."""
    if ref.env:
        return env_value(ref.env, field)
    return _pulumi_config_get(ref.config, stack_name, field, stack_file)


def resolver(stack: Stack) -> Resolve:
    """resolve() for one stack's secrets: what the rooms below take when they need a secret's value."""
    return lambda ref, field: resolve(ref, stack.name, field, stack.path)


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
