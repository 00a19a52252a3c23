"""An Automation API stack that reads what follows an update from the update's own engine events.

After `up`, `refresh` and `destroy`, the Automation API runs `pulumi stack output --json` twice (the second
with --show-secrets) and `pulumi stack history`: three more CLI starts (about 1 s together on 2 cores) for
the outputs and change counts the update's event stream already carried (the root stack's outputs event,
the summary event, the last one before the engine closes the stream). While a command runs with a `Seen`
attached, `EventStack` answers `outputs()` and `info()` from it; without one, or when an event is missing,
it asks the CLI (`stack output --json` once; `stack history`). Secret outputs stay masked ("[secret]"):
nothing is decrypted for them. Two more CLI starts are saved the same way: `pulumi version` (inferry ran it
already: CheckedCommand) and `pulumi stack select` (EventStack.open).
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pulumi import automation as auto
from pulumi.automation.errors import create_command_error

SECRET_SIG = "4dabf18193072939515e22adb298388d"  # Pulumi's mark of a secret value in events and state
MASKED = "[secret]"
ROOT_TYPE = "pulumi:pulumi:Stack"


def unmasked(value: Any) -> tuple[Any, bool]:
    """(value with every secret inside replaced by "[secret]", whether there was one)."""
    if isinstance(value, dict):
        if SECRET_SIG in value:
            return MASKED, True
        pairs = {k: unmasked(v) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(s for _, s in pairs.values())
    if isinstance(value, list):
        items = [unmasked(v) for v in value]
        return [v for v, _ in items], any(s for _, s in items)
    return value, False


class Seen:
    """What one command's engine events said: the root stack's outputs and the change counts."""

    def __init__(self, kind: str):
        self.kind = kind
        self.outputs: auto.OutputMap | None = None
        self.changes: dict[str, int] | None = None
        self.interrupted_before = False  # the engine warned of pending operations left by an interrupted update

    def __call__(self, event: Any) -> None:
        """Record an engine event (the Automation API's on_event)."""
        from infra.lifecycle.stale import PENDING_WARNING

        d = event.diagnostic_event
        if d is not None and d.severity == "warning" and PENDING_WARNING in (d.message or ""):
            self.interrupted_before = True
        if event.res_outputs_event is not None:
            meta = event.res_outputs_event.metadata
            if meta.type == ROOT_TYPE and meta.new is not None:
                self.outputs = {}
                for key, raw in (meta.new.outputs or {}).items():
                    value, secret = unmasked(raw)
                    self.outputs[key] = auto.OutputValue(value, secret)
        elif event.summary_event is not None:
            self.changes = dict(event.summary_event.resource_changes or {})


class CheckedCommand(auto.PulumiCommand):
    """The Pulumi CLI inferry has already run (`pulumi version`); PulumiCommand() would run it once more."""

    def __init__(self, exe: str, version: str):  # noqa: the base's __init__ only runs `pulumi version`
        from semver import VersionInfo

        from infra.lifecycle.pulumicli import version_tuple

        self.command = exe
        self.version = VersionInfo(*version_tuple(version))  # check_pulumi made sure it has three numbers

    def run(self, args: list[str], cwd: str, additional_env: Mapping[str, str], on_output=None,
            on_error=None) -> auto.CommandResult:
        """As PulumiCommand.run (non-interactive, the Automation API's environment), with the CLI in a process
        group of its own that inferry's signals reach and that dies with inferry (infra/lifecycle/clirun.py)."""
        import os

        from infra.lifecycle.clirun import run_cli

        if "--non-interactive" not in args:
            args = ["--non-interactive", *args]
        env = {**os.environ, **additional_env, "PULUMI_AUTOMATION_API": "true"}
        if os.path.isabs(self.command):  # the plugins bundled beside the CLI come first, as the base does
            env["PATH"] = os.pathsep.join([os.path.dirname(self.command), env.get("PATH", "")])
        code, out, err = run_cli([self.command, *args], cwd, env, on_output, on_error)
        result = auto.CommandResult(stdout=out, stderr=err, code=code)
        if code != 0:
            raise create_command_error(result)
        return result


class EventStack(auto.Stack):
    """A stack whose up/refresh/destroy take outputs and change counts from the events, not three CLI runs."""

    seen: Seen | None = None

    @classmethod
    def open(cls, name: str, workspace: auto.LocalWorkspace) -> EventStack:
        """The stack, without `pulumi stack select` (every command names it with --stack, as `pulumi up --stack
        NAME` does, and leaves the folder's selected stack alone); `run` creates it when the backend lacks it."""
        stack = cls.__new__(cls)  # Stack.__init__ only checks types and runs `stack select` or `stack init`
        stack.name, stack.workspace, stack._mode = name, workspace, None
        return stack

    def run(self, action: str, **kwargs: Any) -> Any:
        """One Automation API command (up, preview, ...); the stack is created first when it does not exist yet."""
        try:
            return getattr(self, action)(**kwargs)
        except auto.StackNotFoundError:
            self.workspace.create_stack(self.name)
            return getattr(self, action)(**kwargs)

    def outputs(self) -> auto.OutputMap:
        """The root stack's outputs: from the finished command's events when it sent them, else the CLI's."""
        seen = self.seen
        if seen is not None and seen.changes is not None and seen.outputs is not None:
            return seen.outputs
        return self._masked_outputs()

    def _masked_outputs(self) -> auto.OutputMap:
        """`pulumi stack output --json` once, without --show-secrets (the Automation API also runs it with,
        to learn which are secret): a secret output comes back as "[secret]" and is never decrypted here."""
        done = self.workspace.pulumi_command.run(["stack", "output", "--json", "--stack", self.name],
                                                 self.workspace.work_dir, dict(self.workspace.env_vars))
        return {k: auto.OutputValue(v, v == MASKED) for k, v in json.loads(done.stdout or "{}").items()}

    def info(self, show_secrets: bool = True) -> auto.UpdateSummary | None:
        """The command's change counts from its summary event, else the last update in the stack's history."""
        seen = self.seen
        if seen is None or seen.changes is None:
            return super().info(show_secrets)
        now = datetime.now()
        return auto.UpdateSummary(kind=seen.kind, start_time=now, end_time=now, message="", environment={},
                                  config={}, result="succeeded", resource_changes=seen.changes)
