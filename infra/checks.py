"""Every room's `inferry validate` checks, registered with infra.stack.validate (which imports none of them)."""
from __future__ import annotations


def register_checks() -> None:
    """Register the checks of engines, sizing, targets and storage, in the order they run (idempotent)."""
    from infra.engines.checks import engine_checks
    from infra.sizing.fit import sizing_problems
    from infra.stack.validate import register_check
    from infra.storage.checks import storage_checks
    from infra.targets.registry import TARGETS

    # Sizing first: where it refuses a field, its fix (one that fits) replaces the engine rule's.
    register_check("sizing", sizing_problems)
    register_check("engine", engine_checks)
    for kind, target in TARGETS.items():
        register_check(kind, target.checks)
    register_check("storage", storage_checks)
