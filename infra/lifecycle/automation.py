"""The production `Deployer`: Pulumi's Automation API over this project (`pulumi up --stack NAME` equivalent)."""
from __future__ import annotations

import getpass
import json
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from infra.errors import InferryError, PulumiMissingError
from infra.lifecycle.deployer import Changes, OutputValue, Progress
from infra.lifecycle.progress import describe
from infra.secrets import PULUMI_INSTALL
from infra.stackfile import Stack, project_root, read_yaml

STATE_DIR = ".inferry/state"  # git-ignored: the local file backend when no other backend is configured
PASSPHRASE_VARS = ("PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE")


def require_pulumi() -> str:
    """The `pulumi` executable, or PulumiMissingError saying how to install it."""
    exe = shutil.which("pulumi")
    if exe is None:
        raise PulumiMissingError("the Pulumi CLI (`pulumi`) is not installed or not on PATH",
                                 f"{PULUMI_INSTALL}; then run the command again")
    return exe


def logged_in(environ: Mapping[str, str]) -> bool:
    """Whether `pulumi login` chose a backend (credentials.json names a current one)."""
    home = Path(environ.get("PULUMI_HOME") or Path(environ.get("HOME", "~")).expanduser() / ".pulumi")
    try:
        return bool(json.loads((home / "credentials.json").read_text()).get("current"))
    except (OSError, ValueError, AttributeError):
        return False


def backend_env(root: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """PULUMI_BACKEND_URL for the local file backend, unless the user set or logged into another."""
    if environ.get("PULUMI_BACKEND_URL") or logged_in(environ):
        return {}
    state = root / STATE_DIR
    state.mkdir(parents=True, exist_ok=True)
    return {"PULUMI_BACKEND_URL": f"file://{state}"}


def uses_passphrase(stack: Stack) -> bool:
    """True unless the stack file names another secrets provider (awskms://, gcpkms://, ...)."""
    if stack.path is None or not stack.path.exists():
        return True
    doc = read_yaml(stack.path)
    provider = doc.get("secretsprovider") if isinstance(doc, dict) else None
    return provider in (None, "passphrase")


def passphrase_env(stack: Stack, environ: Mapping[str, str], prompt: Callable[[str], str]) -> dict[str, str]:
    """The passphrase for the secrets provider: from the environment, else asked for (kept in memory only)."""
    if not uses_passphrase(stack) or any(environ.get(v) for v in PASSPHRASE_VARS):
        return {}
    value = prompt(f"Pulumi passphrase for stack {stack.name}: ")
    if not value:
        raise InferryError("no passphrase given for the stack's secrets",
                           "export PULUMI_CONFIG_PASSPHRASE=... (or type it when asked)", where=stack.name)
    return {"PULUMI_CONFIG_PASSPHRASE": value}


def _command_error(stack: Stack, action: str, e: Exception) -> InferryError:
    # Pulumi masks secret values in its own output; keep only the tail that names the cause.
    lines = [ln for ln in str(getattr(e, "stderr", "") or e).splitlines() if ln.strip()]
    tail = "\n".join(lines[-12:])
    return InferryError(f"pulumi {action} failed:\n{tail}",
                        f"fix the cause above, then run `inferry {action} {stack.name}` again", where=stack.name)


class AutomationDeployer:
    """Runs infra/ with the Pulumi CLI through the Automation API (LocalWorkspace on the project root)."""

    def __init__(self, root: Path | None = None, environ: Mapping[str, str] | None = None,
                 prompt: Callable[[str], str] = getpass.getpass):
        self.root = root or project_root()
        self.environ = dict(os.environ if environ is None else environ)
        self.prompt = prompt
        self._passphrases: dict[str, dict[str, str]] = {}

    def _env(self, stack: Stack) -> dict[str, str]:
        if stack.name not in self._passphrases:
            self._passphrases[stack.name] = passphrase_env(stack, self.environ, self.prompt)
        return {"PULUMI_SKIP_UPDATE_CHECK": "true", **backend_env(self.root, self.environ),
                **self._passphrases[stack.name]}

    def _config_file(self, stack: Stack) -> str | None:
        default = self.root / "stacks" / f"Pulumi.{stack.name}.yaml"
        if stack.path is None or stack.path.resolve() == default.resolve():
            return None
        return str(stack.path.resolve())

    def _stack(self, stack: Stack):
        require_pulumi()
        from pulumi import automation as auto

        opts = auto.LocalWorkspaceOptions(work_dir=str(self.root), env_vars=self._env(stack),
                                          secrets_provider="passphrase")
        try:
            return auto.create_or_select_stack(stack.name, work_dir=str(self.root), opts=opts)
        except FileNotFoundError:
            raise PulumiMissingError("the Pulumi CLI (`pulumi`) could not be run", PULUMI_INSTALL) from None
        except auto.CommandError as e:
            raise _command_error(stack, "stack select", e) from None

    def _run(self, stack: Stack, action: str, call: Callable[[Any], Any]) -> Any:
        from pulumi import automation as auto

        ws_stack = self._stack(stack)
        try:
            return call(ws_stack)
        except auto.ConcurrentUpdateError:
            raise InferryError(f"another update of stack {stack.name} is running",
                               f"wait for it, or if it died: pulumi cancel --stack {stack.name}",
                               where=stack.name) from None
        except auto.CommandError as e:
            raise _command_error(stack, action, e) from None

    @staticmethod
    def _events(progress: Progress) -> Callable[[Any], None]:
        def on_event(event: Any) -> None:
            line = describe(event)
            if line:
                progress(line)
        return on_event

    def preview(self, stack: Stack, progress: Progress) -> Changes:
        """What `up` would change, streamed as progress."""
        cfg = self._config_file(stack)
        result = self._run(stack, "preview", lambda s: s.preview(on_event=self._events(progress), config_file=cfg))
        return Changes({str(getattr(k, "value", k)): v for k, v in result.change_summary.items()})

    def up(self, stack: Stack, progress: Progress) -> dict[str, OutputValue]:
        """Create or update the stack; returns its outputs."""
        cfg = self._config_file(stack)
        result = self._run(stack, "up", lambda s: s.up(on_event=self._events(progress), config_file=cfg))
        return {k: OutputValue(v.value, v.secret) for k, v in result.outputs.items()}

    def destroy(self, stack: Stack, progress: Progress) -> Changes:
        """Delete the stack's resources (the stack and its history stay)."""
        cfg = self._config_file(stack)
        result = self._run(stack, "destroy", lambda s: s.destroy(on_event=self._events(progress), config_file=cfg))
        return Changes(dict(result.summary.resource_changes or {}))

    def outputs(self, stack: Stack) -> dict[str, OutputValue]:
        """The outputs of the last update."""
        out = self._run(stack, "outputs", lambda s: s.outputs())
        return {k: OutputValue(v.value, v.secret) for k, v in out.items()}
