"""Run a Pulumi program in-process under Pulumi's own mocks and collect Kubernetes manifests (no CLI, no cluster)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

SECRET_SIG = "4dabf18193072939515e22adb298388d"  # Pulumi's marker for a secret value in mock inputs
SECRET_VALUE = "1b47061264138c4ac30d75fd1eb44270"


@dataclass
class Captured:
    """One resource as registered: type token, Pulumi name, inputs, provider reference."""

    type: str
    name: str
    inputs: dict[str, Any]
    provider: str | None = None


def _mocks_class():
    import pulumi.runtime

    class _Recorder(pulumi.runtime.Mocks):
        def __init__(self) -> None:
            self.resources: list[Captured] = []

        def new_resource(self, args: pulumi.runtime.MockResourceArgs):
            self.resources.append(Captured(args.typ, args.name, dict(args.inputs), args.provider))
            return f"{args.name}-id", dict(args.inputs)

        def call(self, args: pulumi.runtime.MockCallArgs):
            return {}

    return _Recorder


def capture(program: Callable[[], Any], stack: str, config: dict[str, str] | None = None) -> list[Captured]:
    """Every resource the program registers, under mocks (nothing is created anywhere)."""
    import pulumi.runtime
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    mocks = _mocks_class()()
    pulumi.runtime.set_mocks(mocks, project="inferry", stack=stack, preview=False)
    pulumi.runtime.set_all_config(config or {}, [])
    _sync_await(run_pulumi_func(program))
    return mocks.resources


def unsecret(value: Any) -> Any:
    """Strip Pulumi's secret wrappers and turn integral floats (mock numbers) back into ints."""
    if isinstance(value, dict):
        if value.get(SECRET_SIG) == SECRET_VALUE:
            return unsecret(value.get("value"))
        return {k: unsecret(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unsecret(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def is_kubernetes(c: Captured) -> bool:
    """True for Kubernetes objects (not the provider, not components)."""
    return c.type.startswith("kubernetes:")


def to_manifest(c: Captured) -> dict[str, Any]:
    """A captured Kubernetes resource as a plain manifest (apiVersion, kind, metadata, ...)."""
    body = unsecret(c.inputs)
    return {k: v for k, v in body.items() if not k.startswith("__")}
