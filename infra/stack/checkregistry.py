"""Where the rooms above stack/ register their `inferry validate` checks (no imports: registering is free)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Each check takes a Deployment and returns its findings (Problems: errors and warnings).
Check = Callable[[Any], list]
_CHECKS: dict[str, Check] = {}  # in the order they run: an earlier check's refusal hides a later one's


def register_check(name: str, check: Check) -> None:
    """Add a room's check (by name: `skip`/`own` name it); registering a name again replaces it in place."""
    _CHECKS[name] = check


def registered() -> dict[str, Check]:
    """The registered checks in order; loud, not silent, when none is: a stack checked without the rooms'
    checks would pass what validate refuses."""
    if not _CHECKS:
        raise RuntimeError("no validate checks registered: call infra.checks.register_checks() first "
                           "(the CLI and the Pulumi program do)")
    return dict(_CHECKS)
