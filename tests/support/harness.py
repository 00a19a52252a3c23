"""Pulumi test harness: run a program under Pulumi's own mocks and record every resource.

Kept where the real engine cannot do as well: every option combination of a component in a fraction of a
second each, each resource's inputs seen as the program built them, with no plugin or provider behind them.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import runpy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pulumi
import pulumi.runtime
import yaml
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

ROOT = Path(__file__).resolve().parents[2]
# The program's own offline runner (used by `inferry render`) defines these; tests share them.
from infra.targets.kubernetes.offline import SECRET_SIG, Captured as Recorded  # noqa: E402,F401
from infra.targets.kubernetes.offline import to_manifest as manifest, unsecret  # noqa: E402,F401


@dataclass
class RecordingMocks(pulumi.runtime.Mocks):
    """Mocks that record every resource and echo its inputs back as outputs."""

    resources: list[Recorded] = field(default_factory=list)
    outputs_for: Callable[[pulumi.runtime.MockResourceArgs], dict] | None = None

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.resources.append(Recorded(args.typ, args.name, dict(args.inputs), args.provider))
        extra = self.outputs_for(args) if self.outputs_for else {}
        return f"{args.name}-id", {**args.inputs, **extra}

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}

    def of_type(self, typ: str) -> list[Recorded]:
        """Recorded resources of one type token."""
        return [r for r in self.resources if r.type == typ]


def stack_config(stack_file: Path) -> tuple[dict[str, str], list[str]]:
    """(set_all_config values, secret keys) from a stack file; secure values become fake plaintext."""
    doc = yaml.safe_load(stack_file.read_text())
    values, secret = {}, []
    for key, value in doc["config"].items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            # random-looking enough for the gateway's 128-bit key check, the same on every run
            values[key] = f"test-secret-{key.split(':')[-1]}-{hashlib.sha256(key.encode()).hexdigest()[:32]}"
            secret.append(key)
        else:
            values[key] = value if isinstance(value, str) else json.dumps(value)
    return values, secret


def run(program: Callable[[], Any], config: dict[str, str], secret_keys: list[str] | None = None,
        stack: str = "test", mocks: RecordingMocks | None = None) -> tuple[RecordingMocks, dict[str, Any]]:
    """Run a program under mocks with this config; returns (mocks, exports as plain values)."""
    mocks = mocks or RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="inferry", stack=stack, preview=False)
    pulumi.runtime.set_all_config(config, secret_keys or [])
    exports: dict[str, Any] = {}
    original = pulumi.export
    pulumi.export = lambda k, v: exports.__setitem__(k, v)  # type: ignore[assignment]
    try:
        _sync_await(run_pulumi_func(program))
    finally:
        pulumi.export = original  # type: ignore[assignment]
    return mocks, {k: resolve(v) for k, v in exports.items()}


def forget_failed_run() -> None:
    """After a program run that failed as the test expected: drop the Outputs that still hold its error (the next
    run here would raise it again), and let asyncio drop them quietly (it would log each at exit as a "Future
    exception was never retrieved" traceback, an error the test already checked)."""
    from pulumi.runtime.settings import SETTINGS

    SETTINGS.outputs.clear()
    asyncio.get_event_loop().set_exception_handler(quiet_run_errors)


def quiet_run_errors(loop: asyncio.AbstractEventLoop, context: dict) -> None:
    """The loop's exception handler in tests: a failed run's Outputs hold the error it already raised (a
    RunError, or an InferryError), dropped unread when they are collected: nothing to log. The loop is shared by
    every program run in the process, so every harness sets this one handler."""
    from infra.errors import InferryError

    error = context.get("exception")
    if isinstance(error, (pulumi.RunError, InferryError)) and "never retrieved" in context.get("message", ""):
        return
    loop.default_exception_handler(context)


def resolve(value: Any) -> Any:
    """A plain value from an Output (or anything), after the program has run."""
    if isinstance(value, pulumi.Output):
        return _sync_await(value.future())
    return value


def run_main(stack_file: Path, stack: str | None = None) -> tuple[RecordingMocks, dict[str, Any]]:
    """Run __main__.py for a stack file, as `pulumi up` would."""
    config, secret = stack_config(stack_file)
    name = stack or stack_file.name.removeprefix("Pulumi.").removesuffix(".yaml")
    return run(lambda: runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__"), config, secret, name)
