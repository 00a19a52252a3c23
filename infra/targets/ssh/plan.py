"""A deployment -> the typed arguments of every step on every host (what the providers receive)."""
from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, replace

from infra.config import Deployment, SshHost, SshTarget
from infra.engines.spec import ServiceSpec
from infra.targets.ssh.files import RemoteFile
from infra.targets.ssh.host import HostArgs
from infra.targets.ssh.lb import LbArgs
from infra.targets.ssh.pool import Conn
from infra.targets.ssh.service import ServiceArgs
from infra.targets.ssh.weights import Store, WeightsArgs

SERVICE_NAME = "inferry"


@dataclass(frozen=True)
class HostPlan:
    """The steps of one replica."""

    label: str
    host: HostArgs
    weights: WeightsArgs | None  # None when the weights are a host path or the engine streams them
    service: ServiceArgs


@dataclass(frozen=True)
class TargetPlan:
    """Every replica, and the load balancer if the stack names one."""

    hosts: tuple[HostPlan, ...]
    lb: LbArgs | None
    max_parallel: int
    secret_env: tuple[tuple[str, str], ...] = ()  # (env name, stack field of its secret)


def conn_of(t: SshTarget, h: SshHost) -> Conn:
    """A host's connection settings."""
    return Conn(h.address, h.port, h.user, h.label, h.host_key, t.known_hosts, t.trust_on_first_use)


def model_folder(d: Deployment) -> str:
    """The model's folder under the weights cache."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", d.model.name)


def host_model_dir(d: Deployment) -> str:
    """Where the weights are on each host."""
    t = d.target
    if d.model.weights.startswith("/"):
        return d.model.weights
    return posixpath.join(t.weights_cache, model_folder(d))


def process_files(spec: ServiceSpec) -> tuple[RemoteFile, ...]:
    """Without a container the engine reads its files where its arguments say (their mount paths)."""
    return tuple(RemoteFile(f.mount_path, f.content, f.mode) for f in spec.files)


def docker_files(d: Deployment, spec: ServiceSpec) -> tuple[RemoteFile, ...]:
    """Compose file, systemd unit and engine files rendered by infra.render (the engines' templates)."""
    from infra.render import render_ssh_files  # owned by the engines work

    t = d.target
    rendered = render_ssh_files(spec, service_dir=t.service_dir, weights_dir=host_model_dir(d), name=SERVICE_NAME)
    return tuple(RemoteFile(f.path, f.content, f.mode) for f in rendered if not f.secret)


def plan(d: Deployment, spec: ServiceSpec) -> TargetPlan:
    """Step arguments for every host; spec comes from infra.engines.service_spec."""
    t = d.target
    assert isinstance(t, SshTarget)
    files = process_files(spec) if t.runtime == "process" else docker_files(d, spec)
    env = {e.name: e.value for e in spec.env if e.value is not None}
    fetch = not spec.streams_weights and d.model.weights.startswith("s3://")
    store = Store(d.storage.endpoint, d.storage.region, d.model.weights_bucket or d.storage.bucket,
                  d.model.weights_prefix or "", d.storage.addressing_style)
    hosts = []
    for h in t.hosts:
        c = conn_of(t, h)
        host = HostArgs(c, d.provider.gpu, d.provider.gpu_count, d.engine.kind, t.runtime, t.install_docker,
                        t.weights_cache)
        weights = WeightsArgs(c, store, t.weights_cache, model_folder(d), trt_build=spec.build is not None,
                              ops_log=posixpath.join(t.service_dir, "ops.log")) if fetch else None
        svc = ServiceArgs(c, t.runtime, SERVICE_NAME, t.service_dir, files, spec.argv, env, spec.port,
                          spec.health_path, spec.models_path, spec.served_model_name or d.model.name,
                          t.health_timeout_s)
        hosts.append(HostPlan(h.label, host, weights, svc))
    lb = None
    if t.load_balancer is not None:
        lbh = next(h for h in t.hosts if t.load_balancer.host in (h.label, h.address))
        lb = LbArgs(conn_of(t, lbh), posixpath.join(t.service_dir, "lb"), t.load_balancer.port,
                    tuple(f"{h.address}:{spec.port}" for h in t.hosts), spec.served_model_name or d.model.name)
    secret_env = tuple((e.name, e.secret_field or "") for e in spec.secret_env())
    return TargetPlan(tuple(hosts), lb, t.max_parallel, secret_env)


def with_depends(s: ServiceArgs, weights_digest: str) -> ServiceArgs:
    """The service restarts when the weights it serves change."""
    return replace(s, depends=weights_digest)
