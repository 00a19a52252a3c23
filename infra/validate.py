"""Everything `inferry validate` checks beyond the schema: engines, sizing, targets."""
from __future__ import annotations

from collections.abc import Callable

from infra.config import Deployment
from infra.errors import Problem
from infra.problems import bounded

# Each check returns findings (errors and warnings); engines, sizing and targets add theirs here.
Check = Callable[[Deployment], list[Problem]]


def _checks() -> list[Check]:
    # Imported lazily so a broken optional module cannot break loading the config itself.
    from infra.engines.checks import engine_checks
    from infra.fit import sizing_problems
    from infra.storage.checks import storage_checks
    from infra.targets.kubernetes.checks import check_kubernetes
    from infra.targets.ssh.checks import ssh_checks

    checks: list[Check] = [engine_checks, sizing_problems, check_kubernetes, ssh_checks, storage_checks]
    return checks


def findings(d: Deployment) -> list[Problem]:
    """All findings for a schema-valid deployment, each found value cut short (checks may quote a whole
    user value there)."""
    return [bounded(p) for check in _checks() for p in check(d)]
