"""The Pulumi program: load the stack, hand it to the Deployment component (storage -> target), return the exports."""
from __future__ import annotations

from typing import Any

from infra.errors import InferryError
from infra.stack.stackfile import Stack, load_from_pulumi
from infra.stack.validate import require_valid

# The stack's one Deployment component; its children keep the names and URNs earlier versions gave them.
COMPONENT = "deployment"


def build(stack: Stack) -> dict[str, Any]:
    """Create every resource of the stack; returns what the stack exports."""
    from infra.checks import register_checks
    from infra.component.args import DeploymentArgs
    from infra.component.deployment import Deployment
    from infra.component.prepared import Prepared
    from infra.stack.secrets import output

    register_checks()
    d = stack.deployment
    # The gate of every command: what `inferry validate` refuses (a flag the engine rejects, a stack that does
    # not fit) fails `pulumi preview` and `pulumi up` before anything is created.
    for warning in require_valid(d, stack.source):
        _warn(warning.render())
    secrets = {f: output(ref, f) for f, ref in d.secret_refs().items()}
    component = Deployment(COMPONENT, DeploymentArgs.from_stack(Prepared(d, secrets, stack.source)))
    return {
        **component.exports,
        "model": d.model.name,
        "engine": d.engine.kind,
        "target": d.target.kind,
        "provider": d.provider.name,
        "region": d.provider.region,
    }


def _warn(text: str) -> None:
    import pulumi

    pulumi.log.warn(text)


def main() -> None:
    """The program, for `pulumi up` (__main__.py) and `inferry up` (inline): errors as one clean message.

    pulumi.RunError is the one exception both runners (pulumi-language-python-exec and the Automation API's
    in-process language server) report as its message alone, without a Python traceback.
    """
    import pulumi

    from infra.checks import register_checks

    register_checks()  # loading the stack runs the rooms' checks too
    try:
        exports = build(load_from_pulumi())
    except InferryError as e:
        raise pulumi.RunError(e.render()) from None
    for key, value in exports.items():
        pulumi.export(key, value)
