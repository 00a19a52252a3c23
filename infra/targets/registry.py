"""The targets inferry knows, by target.kind: the one place a new target is listed."""
from __future__ import annotations

from infra.errors import InferryError
from infra.stack.problems import did_you_mean
from infra.targets.contract import Target
from infra.targets.kubernetes.target import TARGET as KUBERNETES
from infra.targets.ssh.target import TARGET as SSH

TARGETS: dict[str, Target] = {t.kind: t for t in (SSH, KUBERNETES)}


def target_for(kind: str) -> Target:
    """The target of a stack's target.kind; InferryError (with a did-you-mean) for a kind inferry lacks."""
    try:
        return TARGETS[kind]
    except KeyError:
        hint = did_you_mean(kind, TARGETS) or f"expected one of: {', '.join(TARGETS)}"
        raise InferryError(f"no target of kind {kind!r}", hint, where="target.kind") from None


def kinds() -> tuple[str, ...]:
    """Every target kind, in the order they are listed."""
    return tuple(TARGETS)
