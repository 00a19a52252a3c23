"""The Pulumi CLI for this project: where it is, which backend it uses, and the environment it runs with."""
from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from infra.errors import PulumiMissingError

# The oldest CLI inferry drives: it streams engine events over gRPC (3.206), which outputs and change counts
# are read from (infra/lifecycle/eventstack.py). scripts/tools.sh builds 3.274.1.
MIN_VERSION = (3, 206, 0)
STATE_DIR = ".inferry/state"  # git-ignored: the local file backend when no other backend is configured
INSTALL = ("install the Pulumi CLI (v3.206 or newer): curl -fsSL https://get.pulumi.com | sh, then open a new shell "
           "or add ~/.pulumi/bin to PATH (other ways: https://www.pulumi.com/docs/install/)")


def require_pulumi() -> str:
    """The `pulumi` executable, or PulumiMissingError saying how to install it."""
    exe = shutil.which("pulumi")
    if exe is None:
        raise PulumiMissingError("the Pulumi CLI (`pulumi`) is not installed or not on PATH",
                                 f"{INSTALL}; then run the command again")
    return exe


def check_pulumi() -> tuple[str, str]:
    """(the `pulumi` executable, the version it printed) once it has run `pulumi version`; PulumiMissingError
    when it cannot."""
    import os
    import subprocess

    exe = require_pulumi()
    env = {**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "1"}
    try:
        done = subprocess.run([exe, "version"], capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        why = "timed out" if isinstance(e, subprocess.TimeoutExpired) else (e.strerror or str(e))
        raise PulumiMissingError(f"the Pulumi CLI at {exe} does not run: {why}", INSTALL) from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
        raise PulumiMissingError(f"the Pulumi CLI at {exe} does not run (`pulumi version` exit {done.returncode}: "
                                 f"{last})", INSTALL)
    version = done.stdout.strip()
    if version_tuple(version) < MIN_VERSION:
        raise PulumiMissingError(f"the Pulumi CLI at {exe} is {version or 'of no version'}; inferry needs "
                                 f"v{'.'.join(map(str, MIN_VERSION))} or newer", INSTALL)
    return exe, version


def version_tuple(text: str) -> tuple[int, ...]:
    """(3, 274, 1) of "v3.274.1" (or of "3.274.1-dev.0"); () when it is not a version."""
    import re

    found = re.match(r"v?(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(g) for g in found.groups()) if found else ()


def logged_in(environ: Mapping[str, str]) -> bool:
    """Whether `pulumi login` chose a backend (credentials.json names a current one)."""
    home = Path(environ.get("PULUMI_HOME") or Path(environ.get("HOME", "~")).expanduser() / ".pulumi")
    try:
        return bool(json.loads((home / "credentials.json").read_text()).get("current"))
    except (OSError, ValueError, AttributeError):
        return False


def backend_env(root: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """PULUMI_BACKEND_URL for the local file backend, unless the user set one, the project's Pulumi.yaml names
    one (`inferry init` writes the local state there, for typed `pulumi` too) or the user logged into one."""
    if environ.get("PULUMI_BACKEND_URL"):
        return {}
    named = project_backend(root)
    if named:
        if named.startswith("file://") and not named.startswith("file://~"):  # relative paths: from root
            (root / named.removeprefix("file://")).mkdir(parents=True, exist_ok=True)
        return {}
    if logged_in(environ):
        return {}
    state = root / STATE_DIR
    state.mkdir(parents=True, exist_ok=True)
    return {"PULUMI_BACKEND_URL": f"file://{state}"}


def project_backend(root: Path) -> str | None:
    """The backend URL the project's Pulumi.yaml names, if any."""
    import yaml

    for ext in ("yaml", "yml"):
        path = root / f"Pulumi.{ext}"
        if path.is_file():
            try:
                doc = yaml.safe_load(path.read_text(encoding="utf-8"))
            except (OSError, yaml.YAMLError):
                return None
            backend = doc.get("backend") if isinstance(doc, dict) else None
            url = backend.get("url") if isinstance(backend, dict) else None
            return url if isinstance(url, str) and url else None
    return None


def provider_python(environ: Mapping[str, str]) -> dict[str, str]:
    """The interpreter Pulumi's dynamic-provider plugin runs: this one, which can import infra/.

    pulumi-resource-pulumi-python runs `$PULUMI_PYTHON_CMD -u -m pulumi.dynamic` unless a virtualenv is named.
    """
    if environ.get("PULUMI_PYTHON_CMD") or environ.get("PULUMI_RUNTIME_VIRTUALENV"):
        return {}
    return {"PULUMI_PYTHON_CMD": sys.executable}


def cli_env(root: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """What every Pulumi CLI run for this project adds to the environment (no secrets)."""
    return {"PULUMI_SKIP_UPDATE_CHECK": "true", **backend_env(root, environ), **provider_python(environ)}
