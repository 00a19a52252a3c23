"""Everything `inferry validate` checks beyond the schema: engines, sizing, targets."""
from __future__ import annotations

from collections.abc import Callable

from infra.config import Deployment
from infra.errors import Problem

# Each check returns findings (errors and warnings); engines, sizing and targets add theirs here.
Check = Callable[[Deployment], list[Problem]]


def _checks() -> list[Check]:
    # Imported lazily so a broken optional module cannot break loading the config itself.
    from infra.storage.checks import storage_checks

    checks: list[Check] = [storage_checks]
    return checks


def findings(d: Deployment) -> list[Problem]:
    """All findings for a schema-valid deployment."""
    return [p for check in _checks() for p in check(d)]
