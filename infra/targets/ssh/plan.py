"""A deployment -> the typed arguments of every step on every host (what the providers receive)."""
from __future__ import annotations

import posixpath
from dataclasses import dataclass, replace

from infra.stack.location import WeightsLocation
from infra.stack.secretfix import SecretField
from infra.stack.config import Deployment
from infra.targets.ssh.config import SshHost, SshTarget
from infra.engines.common import weights_dir  # host path = the engines' layout under the cache
from infra.engines.spec import ServiceSpec
from infra.errors import ConfigError
from infra.targets.ssh.render import render_ssh_files, ssh_spec
from infra.targets.ssh.checks import ssh_checks
from infra.targets.ssh.files import RemoteFile
from infra.targets.ssh.host import HostArgs
from infra.targets.ssh.lb import LbArgs
from infra.targets.ssh.pool import Conn
from infra.targets.ssh.service import ServiceArgs
from infra.targets.ssh.speccodec import to_data
from infra.targets.ssh.weights import Store, WeightsArgs



@dataclass(frozen=True)
class HostPlan:
    """The steps of one replica."""

    label: str
    host: HostArgs
    weights: tuple[WeightsArgs, ...]  # the model, then extra weights (a draft); none when streamed or on the host
    service: ServiceArgs


@dataclass(frozen=True)
class TargetPlan:
    """Every replica, and the load balancer if the stack names one."""

    hosts: tuple[HostPlan, ...]
    lb: LbArgs | None
    max_parallel: int
    secret_fields: tuple[str, ...] = ()  # stack fields whose values the service's secret files need
    rolling: bool = True  # services one batch of hosts after another, stopping at the first that fails
    batch: int = 1  # engines restarting at once in a rolling update (target.max_unavailable)


def conn_of(t: SshTarget, h: SshHost) -> Conn:
    """A host's connection settings."""
    return Conn(h.address, h.port, h.user, h.label, h.host_key, t.known_hosts, t.trust_on_first_use)


def service_files(d: Deployment, spec: ServiceSpec) -> tuple[RemoteFile, ...]:
    """The non-secret files infra.targets.ssh.render lays out, in the service's folder."""
    t = d.target
    return tuple(RemoteFile(posixpath.join(t.service_dir, f.name), f.content, f.mode) for f in render_ssh_files(d, spec))


def _check(d: Deployment) -> None:
    errors = [p for p in ssh_checks(d) if p.severity == "error"]
    if errors:
        raise ConfigError("stack", errors)


def plan(d: Deployment, spec: ServiceSpec) -> TargetPlan:
    """Step arguments for every host; spec from infra.targets.ssh.render.ssh_spec (host paths for the process runtime)."""
    t = d.target
    assert isinstance(t, SshTarget)
    _check(d)
    files, data = service_files(d, spec), to_data(spec)
    sources = [] if spec.streams_weights else [d.weights_uri] + [src for src, _ in spec.extra_weights]
    ops_log = posixpath.join(t.service_dir, "ops.log")
    located = [(src, WeightsLocation.parse(src)) for src in sources]
    hosts = []
    for h in t.hosts:
        c = conn_of(t, h)
        host = HostArgs(c, d.provider.gpu_name, d.provider.gpu_count, spec.engine, t.runtime, t.install_docker,
                        t.weights_cache, declared_names(d), spec.cuda_requirement)
        weights = tuple(WeightsArgs(c, _store(d, loc), weights_dir(src, t.weights_cache),
                                    trt_build=spec.build is not None and i == 0, ops_log=ops_log,
                                    keep_on_destroy="weights" in t.keep_on_destroy)
                        for i, (src, loc) in enumerate(located) if loc is not None)
        svc = ServiceArgs(c, t.runtime, t.service_dir, files, data, t.health_timeout_s)
        hosts.append(HostPlan(h.label, host, weights, svc))
    lb = None
    if t.load_balancer is not None:
        lbh = next(h for h in t.hosts if t.load_balancer.host in (h.label, h.address))
        lb = LbArgs(conn_of(t, lbh), posixpath.join(t.service_dir, "lb"), t.load_balancer.port,
                    tuple(f"{h.address}:{spec.port}" for h in t.hosts), spec.served_model_name or d.model.name)
    fields = tuple(sorted({e.secret_field for e in spec.secret_env() if e.secret_field} | {SecretField.API_KEY}))
    return TargetPlan(tuple(hosts), lb, t.max_parallel, fields, t.rollout == "rolling",
                      batch_size(t.max_unavailable, len(hosts)))


def batch_size(max_unavailable: int | str, hosts: int) -> int:
    """Engines a rolling update restarts at once: a count, or a share of the hosts rounded down (Kubernetes'
    maxUnavailable), at least one and at most every host."""
    if isinstance(max_unavailable, str):
        return max(1, min(hosts, hosts * int(max_unavailable.rstrip("%")) // 100))
    return max(1, min(hosts, max_unavailable))


def _store(d: Deployment, loc: WeightsLocation) -> Store:
    """The store holding a weights location (the stack's storage endpoint and keys)."""
    return Store(d.storage.endpoint, d.storage.region, loc.bucket, loc.prefix, d.storage.addressing_style)


def plan_deployment(d: Deployment) -> TargetPlan:
    """The plan with the engine's service as an SSH host runs it."""
    return plan(d, ssh_spec(d))


def with_depends(s: ServiceArgs, weights_digest: str) -> ServiceArgs:
    """The service restarts when the weights it serves change."""
    return replace(s, depends=weights_digest)


def declared_names(d: Deployment) -> tuple[str, ...]:
    """The nvidia-smi names of a GPU the stack declares; () for a catalog GPU (the catalog knows its names)."""
    return () if isinstance(d.provider.gpu, str) else tuple(d.provider.gpu.product_names)
