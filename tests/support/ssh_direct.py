"""Apply or destroy an SSH target without the Pulumi CLI (tests, benches): the providers, driven directly, in order.

    plan = plan_deployment(stack.deployment)        # infra.targets.ssh.plan
    outcome = apply(plan, stack_secrets(stack, resolver(stack)))  # resolver: infra.lifecycle.secrets; .endpoint, .endpoints, .count("writes"), .hosts[i].outputs
    destroy(plan, stack_secrets(stack, resolver(stack)))
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from infra.stack.secretfix import SecretField
from infra.errors import InferryError, RemoteError
from infra.targets.ssh import pool
from infra.targets.ssh.args import props_of, service_args
from infra.targets.ssh.plan import HostPlan, TargetPlan, with_depends
from infra.targets.ssh.providers import GatewayProvider, HostProvider, ServiceProvider, WeightsProvider
from infra.targets.ssh.service import check_service

if TYPE_CHECKING:
    from infra.stack.secrets import Resolve

PRIVATE_KEY, API_KEY = SecretField.PRIVATE_KEY, SecretField.API_KEY
S3_ACCESS, S3_SECRET = SecretField.S3_ACCESS, SecretField.S3_SECRET


@dataclass
class HostOutcome:
    """One replica: each step's outputs, or the error that stopped it."""

    label: str
    outputs: dict[str, dict] = field(default_factory=dict)
    error: InferryError | None = None

    @property
    def endpoint(self) -> str | None:
        """The replica's OpenAI base URL once healthy."""
        return self.outputs.get("service", {}).get("endpoint")


@dataclass
class TargetOutcome:
    """Every replica's outcome and the load balancer's."""

    hosts: list[HostOutcome]
    gateway: dict | None = None

    @property
    def endpoints(self) -> list[str]:
        """Healthy replicas' endpoints, in host order."""
        return [h.endpoint for h in self.hosts if h.endpoint]

    @property
    def endpoint(self) -> str | None:
        """What clients use: the load balancer if any, else the first replica."""
        return (self.gateway or {}).get("endpoint") or next(iter(self.endpoints), None)

    def count(self, what: str) -> int:
        """Total 'writes' or 'restarts' over every step on every host."""
        outs = [o for h in self.hosts for o in h.outputs.values()] + ([self.gateway] if self.gateway else [])
        return sum(int(o.get(what, 0)) for o in outs)

    @property
    def failed(self) -> list[HostOutcome]:
        """Replicas that did not converge."""
        return [h for h in self.hosts if h.error is not None]


def stack_secrets(stack, resolve: Resolve) -> dict[str, str]:
    """Every secret the target needs, by stack field, read by resolve (infra.lifecycle.secrets.resolver)."""
    return {f: resolve(ref, f) for f, ref in stack.deployment.secret_refs().items()}


def _secret_props(plan: TargetPlan, secrets: dict[str, str]) -> dict:
    return {"private_key": secrets[PRIVATE_KEY], "max_parallel": plan.max_parallel}


def _prepare_host(hp: HostPlan, plan: TargetPlan, secrets: dict[str, str]) -> HostOutcome:
    """Facts, preflight and prerequisites, then the weights: everything before the engine changes."""
    out = HostOutcome(hp.label)
    common = _secret_props(plan, secrets)

    def step() -> None:
        out.outputs["host"] = HostProvider().create({**props_of(hp.host), **common}).outs
        for i, wa in enumerate(hp.weights):
            w = {**props_of(wa), **common, "access_key_id": secrets[S3_ACCESS], "secret_access_key": secrets[S3_SECRET]}
            out.outputs["weights" if i == 0 else f"weights{i}"] = WeightsProvider().create(w).outs

    return _run_step(out, hp, step)


def _service_props(hp: HostPlan, out: HostOutcome, plan: TargetPlan, secrets: dict[str, str]) -> dict:
    depends = " ".join(o["manifest_sha256"] for k, o in out.outputs.items() if k.startswith("weights"))
    values = {f: secrets[f] for f in plan.secret_fields}
    return {**props_of(with_depends(hp.service, depends)), **_secret_props(plan, secrets), "secret_values": values}


def _apply_service(hp: HostPlan, out: HostOutcome, plan: TargetPlan, secrets: dict[str, str]) -> HostOutcome:
    """The engine's service on a prepared host, healthy (or rolled back by the provider)."""
    svc = _service_props(hp, out, plan, secrets)

    def step() -> None:
        out.outputs["service"] = ServiceProvider().create(svc).outs

    return _run_step(out, hp, step)


def _restarts_serving(hp: HostPlan, out: HostOutcome, plan: TargetPlan, secrets: dict[str, str]) -> bool:
    """Read-only: whether applying would restart the host's serving engine (an error lands in the outcome)."""
    svc, found = _service_props(hp, out, plan, secrets), [False]

    def step() -> None:
        a = service_args(svc)
        found[0] = check_service(a, svc["private_key"], svc["secret_values"]).restarts_serving

    _run_step(out, hp, step)
    return found[0]


def _run_step(out: HostOutcome, hp: HostPlan, step) -> HostOutcome:
    """Run one host's step; its error goes into the outcome (one host's failure must not hide the others')."""
    try:
        step()
    except InferryError as e:
        out.error = e
    except Exception as e:  # noqa: BLE001 - a bug, reported per host
        out.error = RemoteError(f"unexpected {type(e).__name__}: {e}", "report this as a bug", where=f"host {hp.label}")
    if out.error is not None:
        pool.drop(hp.host.conn)
    return out


def _stop_after(pairs: list[tuple[HostPlan, HostOutcome]], failed: str) -> None:
    """The rolling update stopped at host FAILED: every host in PAIRS keeps its engine as it is."""
    for _, later in pairs:
        later.error = later.error or RemoteError(f"engine not changed: the rolling update stopped at host {failed}",
                                                 f"fix host {failed} and apply again", where=f"host {later.label}")


def _roll(plan: TargetPlan, hosts: list[HostOutcome], secrets: dict[str, str], ex: ThreadPoolExecutor) -> None:
    """Services. Parallel: all at once. Rolling: every host is read at once; hosts whose serving engine would not
    restart (no-ops, first starts) apply at once, then the others one after another in the stack's order, stopping
    at the first host where anything failed (under Pulumi, rollout.py, an unreachable host fails alone)."""
    pairs = list(zip(plan.hosts, hosts))
    if plan.rolling:
        first = next((i for i, (_, out) in enumerate(pairs) if out.error is not None), len(pairs))
        if first < len(pairs):
            _stop_after(pairs[first + 1:], pairs[first][0].label)
        pairs = pairs[:first]
    ready = [p for p in pairs if p[1].error is None]
    rolls = [False] * len(ready)
    if plan.rolling:  # read-only, every host at once
        rolls = list(ex.map(lambda p: _restarts_serving(*p, plan, secrets), ready))
    queue = [p for p, r in zip(ready, rolls) if r]
    now = [p for p, r in zip(ready, rolls) if not r and p[1].error is None]  # not unreadable ones
    list(ex.map(lambda p: _apply_service(*p, plan, secrets), now))
    failed = next((p[0].label for p in ready if p[1].error is not None), None)
    for i in range(0, len(queue), plan.batch):  # a batch of engines restarts at once; the others serve
        if failed is not None:
            _stop_after(queue[i:], failed)
            return
        batch = queue[i:i + plan.batch]
        done = list(ex.map(lambda p: _apply_service(*p, plan, secrets), batch))
        failed = next((hp.label for (hp, _), o in zip(batch, done) if o.error is not None), None)


def _raise_if_failed(res: TargetOutcome, verb: str) -> None:
    if not res.failed:
        return
    ok = [f"{h.label} ({h.endpoint})" for h in res.hosts if h.error is None]
    lines = [e.error.render().replace("\n", "\n    ") for e in res.failed]
    err = RemoteError(f"{verb} failed on {len(res.failed)} of {len(res.hosts)} hosts:\n  - " + "\n  - ".join(lines)
                      + (f"\n  converged: {', '.join(ok)}" if ok else ""),
                      "fix the hosts named above and apply again; converged hosts will not be touched")
    err.outcome = res  # type: ignore[attr-defined]
    raise err


def apply(plan: TargetPlan, secrets: dict[str, str]) -> TargetOutcome:
    """Converge every host (at most max_parallel at once; services rolling unless the plan says parallel), then the
    gateway; raises naming failed hosts."""
    with ThreadPoolExecutor(max_workers=plan.max_parallel) as ex:
        hosts = list(ex.map(lambda hp: _prepare_host(hp, plan, secrets), plan.hosts))
        _roll(plan, hosts, secrets, ex)
    res = TargetOutcome(hosts)
    _raise_if_failed(res, "apply")
    if plan.gateway is not None:
        values = {f: secrets[f] for f in plan.secret_fields if f in secrets}
        res.gateway = GatewayProvider().create({**props_of(plan.gateway), **_secret_props(plan, secrets),
                                                "secret_values": values}).outs
    return res


def destroy(plan: TargetPlan, secrets: dict[str, str]) -> TargetOutcome:
    """Stop and remove the service (and the gateway) on every host, and the weights unless the stack keeps
    them (target.keep_on_destroy)."""
    common = _secret_props(plan, secrets)
    if plan.gateway is not None:
        GatewayProvider().delete("gateway", {**props_of(plan.gateway), **common})

    def one(hp: HostPlan) -> HostOutcome:
        out = HostOutcome(hp.label)
        try:
            ServiceProvider().delete(hp.label, {**props_of(hp.service), **common})
            for wa in hp.weights:
                WeightsProvider().delete(hp.label, {**props_of(wa), **common})
        except InferryError as e:
            out.error = e
        return out

    with ThreadPoolExecutor(max_workers=plan.max_parallel) as ex:
        res = TargetOutcome(list(ex.map(one, plan.hosts)))
    _raise_if_failed(res, "destroy")
    return res
