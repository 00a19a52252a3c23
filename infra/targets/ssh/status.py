"""`inferry status` on SSH hosts: each engine's state, restarts since the last apply, since when it runs, and its
/metrics read over SSH (the gateway refuses /metrics to the internet)."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import shlex

from infra.stack.config import Deployment
from infra.errors import InferryError, RemoteError
from infra.targets.contract import MetricsRead
from infra.targets.ssh import pool
from infra.targets.ssh.service import ServiceArgs

# Engine states nothing on the host will leave by itself (a reboot under the process runtime, a removed
# container): `inferry up` starts the engine again. Docker's "restarting" is its restart policy at work.
DOWN = ("stopped", "exited", "dead", "created")


@dataclass(frozen=True)
class EngineState:
    """One host's engine as its runtime reports it (Docker, or the process supervisor)."""

    host: str
    status: str  # running | restarting | exited | stopped | absent | ...
    restarts: int
    since: str

    def line(self, stack: str = "") -> str:
        """How `inferry status` prints it; an engine that is down names the command that starts it again."""
        if self.status == "absent":
            return f"host {self.host}: no engine (not applied, or destroyed)"
        if self.status in DOWN:
            fix = f"; run `inferry up {stack}` to start it again" if stack else ""
            return f"host {self.host}: engine {self.status} (last started {self.since or '?'}){fix}"
        times = "time" if self.restarts == 1 else "times"
        return (f"host {self.host}: engine {self.status} since {self.since or '?'}; "
                f"restarted {self.restarts} {times} since the last apply")


def engine_state(a: ServiceArgs, private_key: str) -> EngineState:
    """Read one host's engine state (one command)."""
    out = pool.read(a.conn, private_key, lambda s: s.run(a.rt.state(), "read the engine's state")).out.split()
    if not out:
        return EngineState(a.conn.label, "absent", 0, "")
    status, restarts, since = (out + ["", "0", ""])[:3]
    return EngineState(a.conn.label, status, int(restarts) if restarts.isdigit() else 0, since)


def reply(url: str, timeout: float = 2.0) -> int | None:
    """The HTTP status GET URL answers with from this machine; 0 when the host answered without HTTP (a refused
    connection: it is up and nothing listens); None when nothing answered (unreachable, or the port dropped)."""
    import errno
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        silent = isinstance(reason, TimeoutError) or getattr(reason, "errno", None) in (errno.EHOSTUNREACH,
                                                                                       errno.ENETUNREACH)
        return None if silent else 0
    except ValueError:
        return None


def engine_down(a: ServiceArgs, private_key: str) -> bool:
    """Whether the host runs no engine now (a reboot under the process runtime, a container removed by hand).

    An engine whose health path answers 200 from here is up, with no SSH (a no-op `up` stays quick); a host that
    answers otherwise (refused: nothing listens) is asked whether its runtime runs the engine (one still loading
    is not down). A host that answers nothing here (unreachable, or a firewall dropping the port) or cannot be
    read over SSH is not called down: its step stays as the last apply left it.
    """
    # Behind a gateway the engine listens on the host's loopback or private address: only SSH can tell.
    code = 1 if a.bind else reply(a.endpoint.removesuffix("/v1") + str(a.spec.get("health_path") or "/health"))
    if code is None or code == 200:
        return False
    try:
        out = pool.read(a.conn, private_key, lambda s: s.run(a.rt.status(), "read whether the engine runs")).out
    except RemoteError:
        return False
    return out.strip() != "running"


def host_lines(d: Deployment, private_key: str, stack: str = "") -> list[str]:
    """One line per host, in host order; a host that cannot be read says why, one that is down the fix for
    STACK."""
    from infra.targets.ssh.plan import plan_deployment

    plan = plan_deployment(d)

    def one(hp) -> str:
        try:
            return engine_state(hp.service, private_key).line(stack)
        except InferryError as e:
            return f"host {hp.label}: not read: {e.message}"

    with ThreadPoolExecutor(max_workers=plan.max_parallel) as ex:
        return list(ex.map(one, plan.hosts))


def metrics_command(a: ServiceArgs, with_key: bool) -> str:
    """curl on the host for the engine's /metrics at the address it listens on; the key header, when the engine
    wants one (an auth proxy without a gateway), comes on stdin, never in argv. Prints the body, then the status."""
    url = a.local_base + str(a.spec.get("metrics_path") or "/metrics")
    header = " -H @-" if with_key else ""
    return f"curl -sS --max-time 5{header} -w '\\n%{{http_code}}' {shlex.quote(url)}"


def metrics_read(a: ServiceArgs, private_key: str, api_key: str | None) -> MetricsRead:
    """One host's engine /metrics over SSH (behind a gateway the engine carries no key: none is sent)."""
    key = None if a.bind else api_key
    source = f"host {a.conn.label}"
    try:
        r = pool.read(a.conn, private_key, lambda s: s.run(
            metrics_command(a, key is not None), "read the engine's /metrics",
            stdin=f"Authorization: Bearer {key}\n" if key else "", check=False, timeout=30))
    except InferryError as e:
        return MetricsRead(source, None, f"not read: {e.message}")
    body, _, code = r.out.rpartition("\n")
    if r.code != 0 or code.strip() != "200":
        return MetricsRead(source, None, f"GET {a.spec.get('metrics_path') or '/metrics'} on the host answered "
                           f"{code.strip() if r.code == 0 else 'nothing'}")
    return MetricsRead(source, body)


def metrics_reads(d: Deployment, private_key: str, api_key: str | None = None) -> list[MetricsRead]:
    """Every host's engine /metrics, in host order, read in parallel."""
    from infra.targets.ssh.plan import plan_deployment

    plan = plan_deployment(d)
    with ThreadPoolExecutor(max_workers=plan.max_parallel) as ex:
        return list(ex.map(lambda hp: metrics_read(hp.service, private_key, api_key), plan.hosts))
