"""The targets inferry knows, by target.kind: the one place a new target is listed (MODULES, one line each)."""
from __future__ import annotations

from functools import cache
from importlib import import_module

from infra.errors import InferryError
from infra.stack.problems import did_you_mean
from infra.targets.contract import Target

# Each module exports TARGET, its descriptor (infra.targets.contract.Target): its section, starter and steps.
MODULES = ("infra.targets.ssh.target", "infra.targets.kubernetes.target")


@cache
def _targets(modules: tuple[str, ...]) -> dict[str, Target]:
    found = [import_module(m).TARGET for m in modules]
    return {t.kind: t for t in found}


def targets() -> dict[str, Target]:
    """Every target by kind, in the order MODULES lists them."""
    return _targets(MODULES)


def target_for(kind: str) -> Target:
    """The target of a stack's target.kind; InferryError (with a did-you-mean) for a kind inferry lacks."""
    known = targets()
    try:
        return known[kind]
    except KeyError:
        hint = did_you_mean(kind, known) or f"expected one of: {', '.join(known)}"
        raise InferryError(f"no target of kind {kind!r}", hint, where="target.kind") from None


def kinds() -> tuple[str, ...]:
    """Every target kind, in the order they are listed."""
    return tuple(targets())
