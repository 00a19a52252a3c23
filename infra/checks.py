"""Every room's `inferry validate` checks, registered with infra.stack.validate (which imports none of them).

Registering costs nothing: each check imports its room when it first runs, so a command that never validates
(`inferry weights ...`) never loads the schema, the engines or the targets.
"""
from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any


def _lazy(module: str, name: str) -> Callable[[Any], list]:
    def check(d: Any) -> list:
        return getattr(import_module(module), name)(d)

    check.__qualname__ = f"{module}.{name}"
    return check


def _target_checks(d: Any) -> list:
    """The checks of the stack's own target (through the registry: no target is named here)."""
    from infra.targets.registry import target_for

    return target_for(d.target.kind).checks(d)


def _engines() -> tuple:
    """The registered engines' descriptors (imported when the schema first needs the engine sections)."""
    from infra.engines.registry import ENGINES

    return ENGINES


def _targets() -> tuple:
    """The registered targets' descriptors (imported when the schema first needs the target sections)."""
    from infra.targets.registry import targets

    return tuple(targets().values())


def register_checks() -> None:
    """Register the engine and target sections with the schema, then the checks of sizing, engines, targets,
    storage and privacy (policy.sub_processors), in the order they run (idempotent)."""
    from infra.stack.checkregistry import register_check
    from infra.stack.kinds import register_engines, register_targets

    register_engines(_engines)
    register_targets(_targets)
    # Sizing first: where it refuses a field, its fix (one that fits) replaces the engine rule's.
    register_check("sizing", _lazy("infra.sizing.fit", "sizing_problems"))
    register_check("engine", _lazy("infra.engines.checks", "engine_checks"))
    register_check("target", _target_checks)
    register_check("storage", _lazy("infra.storage.checks", "storage_checks"))
    register_check("privacy", _lazy("infra.privacy.subprocessors", "check_sub_processors"))
