"""The Pulumi program: load the stack, build storage -> engine -> target, return the exports."""
from __future__ import annotations

from typing import Any

from infra.errors import InferryError
from infra.stack.stackfile import Stack, load_from_pulumi
from infra.stack.validate import require_valid


def build(stack: Stack) -> dict[str, Any]:
    """Create every resource of the stack; returns what the stack exports."""
    from infra.storage.component import build_storage

    d = stack.deployment
    # The gate of every command: what `inferry validate` refuses (a flag the engine rejects, a stack that does
    # not fit) fails `pulumi preview` and `pulumi up` before anything is created.
    for warning in require_valid(d, stack.source):
        _warn(warning.render())
    return {
        **build_storage(d),
        **_target(stack),
        "model": d.model.name,
        "engine": d.engine.kind,
        "target": d.target.kind,
        "provider": d.provider.name,
        "region": d.provider.region,
    }


def _warn(text: str) -> None:
    import pulumi

    pulumi.log.warn(text)


def _target(stack: Stack) -> dict[str, Any]:
    """The one polymorphic seam: the target chosen by target.kind; returns its exports."""
    if stack.deployment.target.kind == "kubernetes":
        from infra.targets.kubernetes.deploy import deploy

        return deploy(stack)
    if stack.deployment.target.kind == "ssh":
        from infra.targets.ssh.component import build as build_ssh

        return build_ssh(stack.deployment)
    return {}


def main() -> None:
    """The program, for `pulumi up` (__main__.py) and `inferry up` (inline): errors as one clean message.

    pulumi.RunError is the one exception both runners (pulumi-language-python-exec and the Automation API's
    in-process language server) report as its message alone, without a Python traceback.
    """
    import pulumi

    try:
        exports = build(load_from_pulumi())
    except InferryError as e:
        raise pulumi.RunError(e.render()) from None
    for key, value in exports.items():
        pulumi.export(key, value)
