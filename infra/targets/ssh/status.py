"""`inferry status` on SSH hosts: each engine's state, restarts since the last apply, and since when it runs."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from infra.stack.config import Deployment
from infra.errors import InferryError
from infra.targets.ssh.pool import session
from infra.targets.ssh.service import ServiceArgs


@dataclass(frozen=True)
class EngineState:
    """One host's engine as its runtime reports it (Docker, or the process supervisor)."""

    host: str
    status: str  # running | restarting | exited | stopped | absent | ...
    restarts: int
    since: str

    def line(self) -> str:
        """How `inferry status` prints it."""
        if self.status == "absent":
            return f"host {self.host}: no engine (not applied, or destroyed)"
        times = "time" if self.restarts == 1 else "times"
        return (f"host {self.host}: engine {self.status} since {self.since or '?'}; "
                f"restarted {self.restarts} {times} since the last apply")


def engine_state(a: ServiceArgs, private_key: str) -> EngineState:
    """Read one host's engine state (one command)."""
    out = session(a.conn, private_key).run(a.rt.state(), "read the engine's state").out.split()
    if not out:
        return EngineState(a.conn.label, "absent", 0, "")
    status, restarts, since = (out + ["", "0", ""])[:3]
    return EngineState(a.conn.label, status, int(restarts) if restarts.isdigit() else 0, since)


def host_lines(d: Deployment, private_key: str) -> list[str]:
    """One line per host, in host order; a host that cannot be read says why."""
    from infra.targets.ssh.plan import plan_deployment

    plan = plan_deployment(d)

    def one(hp) -> str:
        try:
            return engine_state(hp.service, private_key).line()
        except InferryError as e:
            return f"host {hp.label}: not read: {e.message}"

    with ThreadPoolExecutor(max_workers=plan.max_parallel) as ex:
        return list(ex.map(one, plan.hosts))
