"""The production `Deployer`: Pulumi's Automation API over this project (`pulumi up --stack NAME` equivalent).

The program runs inline (in this process, served to the CLI by the Python SDK's own language server), so
`inferry up` needs only the `pulumi` executable: no language plugin. The project's Pulumi.yaml and stack files
are the ones `pulumi up` in this folder uses, so both ways share stacks, state and secrets.
"""
from __future__ import annotations

import getpass
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from infra.errors import InferryError, Interrupted, PulumiMissingError
from infra.lifecycle.deployer import Changes, OutputValue, Progress
from infra.lifecycle.progress import describe, failure
from infra.lifecycle.pulumicli import INSTALL, check_pulumi, cli_env
from infra.lifecycle.stale import PENDING_WARNING, backend_folder, clear_own_pending, remove_stale_locks
from infra.stack.project import project_root
from infra.stack.stackfile import Stack, read_yaml

PARALLEL = 256  # resource operations at once: every host's step of a 64-host fleet; target.max_parallel bounds SSH
PASSPHRASE_VARS = ("PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE")


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


def _command_error(stack: Stack, action: str, e: Exception, errors: list[str] | None = None) -> InferryError:
    """The engine's error diagnostics when it sent any (one per failed resource), else the tail of stderr.

    Pulumi masks secret values in its own output.
    """
    if errors:
        cause = "\n".join(f"  - {_indented(text)}" for text in errors)
    else:
        lines = [ln for ln in str(getattr(e, "stderr", "") or e).splitlines() if ln.strip()]
        cause = "\n".join(lines[-12:])
    return InferryError(f"pulumi {action} failed:\n{cause}",
                        f"fix the cause above, then run `inferry {action} {stack.name}` again", where=stack.name)


def _stderr(line: str) -> None:
    import sys

    print(line, file=sys.stderr)


def _indented(text: str) -> str:
    return text.replace("\n", "\n    ")


class AutomationDeployer:
    """Runs infra/ with the Pulumi CLI through the Automation API (LocalWorkspace on the project root)."""

    def __init__(self, program: Callable[[], None], root: Path | None = None,
                 environ: Mapping[str, str] | None = None, prompt: Callable[[str], str] = getpass.getpass):
        self.program = program  # infra.program.main: the door above this floor, given by the CLI
        self.root = root or project_root()
        self.environ = dict(os.environ if environ is None else environ)
        self.prompt = prompt
        self._passphrases: dict[str, dict[str, str]] = {}
        self._cli: tuple[str, str] | None = None  # (executable, version) once `pulumi version` ran
        self._holders: list[str] = []  # who holds the stack's lock, when an update was refused

    def _env(self, stack: Stack) -> dict[str, str]:
        if stack.name not in self._passphrases:
            self._passphrases[stack.name] = passphrase_env(stack, self.environ, self.prompt)
        return {**cli_env(self.root, self.environ), **self._passphrases[stack.name]}

    def _config_file(self, stack: Stack) -> str | None:
        default = self.root / "stacks" / f"Pulumi.{stack.name}.yaml"
        if stack.path is None or stack.path.resolve() == default.resolve():
            return None
        return str(stack.path.resolve())

    def check(self, stack: Stack) -> None:
        """Fail now, before any output or question, when the stack cannot run: no usable Pulumi CLI, no
        passphrase (asked here once when it is not in the environment), no project."""
        self._cli = check_pulumi()
        self._require_project(stack)
        self._env(stack)

    def _require_project(self, stack: Stack) -> None:
        """A Pulumi.yaml must be there: without one the Automation API would write its own into the folder (with
        no stackConfigDir, so Pulumi would read a Pulumi.NAME.yaml beside it, not the stack file)."""
        if not any((self.root / f"Pulumi.{ext}").exists() for ext in ("yaml", "yml", "json")):
            raise InferryError(f"{self.root} is not a Pulumi project (no Pulumi.yaml here or above)",
                               f"run `inferry init {stack.name}` in the folder that should hold the project: it "
                               "writes Pulumi.yaml and __main__.py there and keeps a stack file that exists; "
                               "or run inferry in your project's folder", where=stack.name)

    def _stack(self, stack: Stack):
        from pulumi import automation as auto

        from infra.lifecycle.eventstack import CheckedCommand, EventStack
        self._cli = self._cli or check_pulumi()
        self._require_project(stack)
        ws = auto.LocalWorkspace(work_dir=str(self.root), program=self.program, env_vars=self._env(stack),
                                 secrets_provider="passphrase", pulumi_command=CheckedCommand(*self._cli))
        return EventStack.open(stack.name, ws)

    def _run(self, stack: Stack, action: str, progress: Progress | None = None) -> Any:
        """Run one Automation API command; a failure becomes an InferryError with the engine's own errors. A lock
        left by a killed update is removed (with a message) and the command runs again."""
        from pulumi import automation as auto

        try:
            return self._attempt(stack, action, progress)
        except auto.ConcurrentUpdateError:
            if not self._unlock(stack, progress):
                raise self._locked(stack) from None
        try:
            return self._attempt(stack, action, progress)
        except auto.ConcurrentUpdateError:
            raise self._locked(stack) from None

    def _attempt(self, stack: Stack, action: str, progress: Progress | None) -> Any:
        from pulumi import automation as auto

        from infra.lifecycle.eventstack import Seen

        ws_stack = self._stack(stack)
        errors: list[str] = []
        ws_stack.seen = seen = Seen(action)

        def on_event(event: Any) -> None:
            seen(event)
            line = describe(event, preview=action == "preview")
            if seen.interrupted_before and PENDING_WARNING in (line or ""):
                line = ("  note: the last update was interrupted; its unfinished steps run again now "
                        "(each converges what it finds on the host)")
            if line and progress is not None:
                progress(line)
            found = failure(event)
            if found and found not in errors:
                errors.append(found)

        try:
            if action in ("outputs", "export_stack"):
                return ws_stack.run(action)
            kwargs = {"on_event": on_event, "config_file": self._config_file(stack), **self._parallel()}
            if action != "preview":  # a summary read from `stack history` (no summary event) would decrypt config
                kwargs["show_secrets"] = False
            return ws_stack.run(action, **kwargs)
        except Interrupted as e:
            raise Interrupted(f"{e.message}: pulumi {action} stopped once the steps under way had finished, and "
                              "recorded them in the stack's state",
                              f"run `inferry {action} {stack.name}` again to finish", where=stack.name) from None
        except FileNotFoundError:
            raise PulumiMissingError("the Pulumi CLI (`pulumi`) could not be run", INSTALL) from None
        except auto.CommandError as e:
            if isinstance(e, auto.ConcurrentUpdateError):
                raise
            raise _command_error(stack, action, e, errors) from None
        finally:
            if seen.interrupted_before:
                self._clear_pending(stack, ws_stack, progress)

    def _unlock(self, stack: Stack, progress: Progress | None) -> bool:
        """Remove the stack's locks whose update no longer runs; True when one was and none is held."""
        folder = backend_folder(self._env(stack), self.root)
        if folder is None:
            return False
        removed, held = remove_stale_locks(folder, stack.name)
        for line in removed:
            (progress or _stderr)(f"  note: {line}")
        self._holders = held
        return bool(removed) and not held

    def _locked(self, stack: Stack) -> InferryError:
        who = "; ".join(self._holders) or "another process"
        return InferryError(f"another update of stack {stack.name} is running ({who})",
                            f"wait for it to finish; if it is no longer running: pulumi cancel --stack {stack.name}",
                            where=stack.name)

    def _clear_pending(self, stack: Stack, ws_stack: Any, progress: Progress | None) -> None:
        """After an update that found pending operations: clear the interrupted creates of inferry's own steps
        (this update ran them again); name what is left with the command that clears it."""
        from pulumi import automation as auto

        say = progress or _stderr
        ws = ws_stack.workspace
        try:
            cleared, left = clear_own_pending(ws.pulumi_command, ws.work_dir, dict(ws.env_vars), stack.name)
        except auto.CommandError as e:
            say(f"  warning: could not clear pending operations: {str(e.stderr).strip()[-300:]}")
            return
        if cleared:
            say(f"  note: cleared {cleared} interrupted create(s) of host steps from the stack's state")
        if left:
            say(f"  warning: still pending from an interrupted update: {', '.join(left)}; check them, then run "
                f"`pulumi refresh --stack {stack.name} --clear-pending-creates --yes`")

    def _parallel(self) -> dict[str, int]:
        """--parallel for the CLI: its default is 4 per CPU (pkg/cmd/pulumi/operations/up.go defaultParallel), so on
        a 2-core machine a fleet's steps (each holding its call through the engine's load) went 8 at a time.
        PULUMI_PARALLEL, when the user set it, stays the CLI's to read."""
        return {} if self.environ.get("PULUMI_PARALLEL") else {"parallel": PARALLEL}

    def preview(self, stack: Stack, progress: Progress) -> Changes:
        """What `up` would change, streamed as progress."""
        result = self._run(stack, "preview", progress)
        return Changes({str(getattr(k, "value", k)): v for k, v in result.change_summary.items()})

    def up(self, stack: Stack, progress: Progress) -> dict[str, OutputValue]:
        """Create or update the stack; returns its outputs."""
        result = self._run(stack, "up", progress)
        return {k: OutputValue(v.value, v.secret) for k, v in result.outputs.items()}

    def refresh(self, stack: Stack, progress: Progress) -> Changes:
        """Read every resource back from where it lives; state records what was found. Each resource whose
        host differs from its last apply (outputs.drift) gets a progress line; the next `up` converges it."""
        result = self._run(stack, "refresh", progress)
        state = self._run(stack, "export_stack").deployment or {}
        for r in state.get("resources") or []:
            drift = (r.get("outputs") or {}).get("drift")
            if drift:
                progress(f"  drift: {r['urn'].rsplit('::', 1)[-1]}: {'; '.join(map(str, drift))}")
        return Changes(dict(result.summary.resource_changes or {}))

    def destroy(self, stack: Stack, progress: Progress) -> Changes:
        """Delete the stack's resources (the stack and its history stay)."""
        result = self._run(stack, "destroy", progress)
        return Changes(dict(result.summary.resource_changes or {}))

    def outputs(self, stack: Stack) -> dict[str, OutputValue]:
        """The outputs of the last update."""
        out = self._run(stack, "outputs")
        return {k: OutputValue(v.value, v.secret) for k, v in out.items()}
