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
from infra.errors import ConfigError, Problem
from infra.targets.ssh.render import behind_gateway, render_ssh_files, ssh_spec
from infra.targets.ssh.checks import ssh_checks
from infra.targets.ssh.files import RemoteFile
from infra.targets.ssh.host import HostArgs
from infra.targets.ssh.gateway import GatewayArgs
from infra.targets.ssh.pool import Conn
from infra.targets.ssh.service import ServiceArgs
from infra.targets.ssh.speccodec import to_data
from infra.targets.ssh.weights import Store, WeightsArgs

GATEWAY_FIELDS = (SecretField.API_KEY, SecretField.PREVIOUS_API_KEY, SecretField.GATEWAY_CERT_KEY,
                  SecretField.GATEWAY_EAB_HMAC)


@dataclass(frozen=True)
class HostPlan:
    """The steps of one replica."""

    label: str
    host: HostArgs
    weights: tuple[WeightsArgs, ...]  # the model, then extra weights (a draft); none when streamed or on the host
    service: ServiceArgs


@dataclass(frozen=True)
class TargetPlan:
    """Every replica, and the gateway if the stack names one."""

    hosts: tuple[HostPlan, ...]
    gateway: GatewayArgs | None
    max_parallel: int
    secret_fields: tuple[str, ...] = ()  # stack fields whose values the service's secret files need
    rolling: bool = True  # services one batch of hosts after another, stopping at the first that fails
    batch: int = 1  # engines restarting at once in a rolling update (target.max_unavailable)


def conn_of(t: SshTarget, h: SshHost) -> Conn:
    """A host's connection settings."""
    return Conn(h.address, h.port, h.user, h.label, h.host_key, t.known_hosts, t.trust_on_first_use)


def service_files(d: Deployment, spec: ServiceSpec, bind: str = "") -> tuple[RemoteFile, ...]:
    """The non-secret files infra.targets.ssh.render lays out, in the service's folder."""
    t = d.target
    return tuple(RemoteFile(posixpath.join(t.service_dir, f.name), f.content, f.mode)
                 for f in render_ssh_files(d, spec, bind=bind))


def bind_of(t: SshTarget, h: SshHost) -> str:
    """The one address a host's engine listens on: loopback on the gateway's host, the private address on the
    others; "" (every address) without a gateway."""
    g = t.gateway_host
    if g is None:
        return ""
    return "127.0.0.1" if h is g else (h.private_address or "")


def _check(d: Deployment) -> None:
    errors = [p for p in ssh_checks(d) if p.severity == "error"]
    if errors:
        raise ConfigError("stack", errors)


def plan(d: Deployment, spec: ServiceSpec) -> TargetPlan:
    """Step arguments for every host; spec from infra.targets.ssh.render.ssh_spec (host paths for the process runtime)."""
    t = d.target
    assert isinstance(t, SshTarget)
    _check(d)
    sources = [] if spec.streams_weights else [d.weights_uri] + [src for src, _ in spec.extra_weights]
    ops_log = posixpath.join(t.service_dir, "ops.log")
    located = [(src, WeightsLocation.parse(src)) for src in sources]
    hosts = []
    for h in t.hosts:
        c = conn_of(t, h)
        host = HostArgs(c, d.provider.gpu_name, d.provider.gpu_count, spec.engine, t.runtime, t.install_docker,
                        t.weights_cache, declared_names(d), spec.cuda_requirement,
                        gateway_limits=h is t.gateway_host and t.gateway is not None and t.gateway.limits.enabled)
        weights = tuple(WeightsArgs(c, _store(d, loc), weights_dir(src, t.weights_cache),
                                    trt_build=spec.build is not None and i == 0, ops_log=ops_log,
                                    keep_on_destroy="weights" in t.keep_on_destroy)
                        for i, (src, loc) in enumerate(located) if loc is not None)
        bind = bind_of(t, h)
        hspec = behind_gateway(spec, bind, t.runtime) if bind else spec
        svc = ServiceArgs(c, t.runtime, t.service_dir, service_files(d, hspec, bind), to_data(hspec),
                          t.health_timeout_s, bind=bind)
        hosts.append(HostPlan(h.label, host, weights, svc))
    fields = {e.secret_field for e in spec.secret_env() if e.secret_field} | {SecretField.API_KEY}
    if t.gateway is not None:  # the gateway step reads its keys and TLS secrets from the same values
        fields |= {f for f in d.secret_refs() if f in GATEWAY_FIELDS}
    return TargetPlan(tuple(hosts), gateway_args(d, spec), t.max_parallel, tuple(sorted(fields)),
                      t.rollout == "rolling", batch_size(t.max_unavailable, len(hosts)))


def gateway_args(d: Deployment, spec: ServiceSpec) -> GatewayArgs | None:
    """The gateway step's inputs: Caddy on its host in front of every host's engine."""
    from infra.engines.registry import engine_for
    from infra.gateway.caddy import GatewayPlan

    t = d.target
    assert isinstance(t, SshTarget)
    g, gh = t.gateway, t.gateway_host
    if g is None or gh is None:
        return None
    plan = GatewayPlan(
        state_dir=posixpath.join(t.service_dir, "gateway"),
        upstreams=tuple(f"{bind_of(t, h)}:{spec.port}" for h in t.hosts),
        api_routes=engine_for(d.engine.kind).api_routes, health_path=spec.health_path, tls=g.tls,
        domains=tuple(g.domains), https_port=g.https_port, http_port=g.http_port, acme_directory=g.acme.directory,
        acme_email=g.acme.email or "", acme_ca_root=_pem(g.acme.ca_root, "target.gateway.acme.ca_root"),
        eab_key_id=g.acme.eab_key_id or "", certificate=_pem(g.certificate, "target.gateway.certificate"),
        max_body_bytes=g.max_body_mb << 20, hold_s=g.hold_s, balance=g.balance, access_log_days=g.access_log_days,
        **g.limits.plan_fields())
    return GatewayArgs(conn_of(t, gh), plan, spec.served_model_name or d.model.name)


def _pem(path: str | None, field: str) -> str:
    """The PEM text of a certificate file the stack names (read here, uploaded to the gateway's host)."""
    if path is None:
        return ""
    from pathlib import Path

    try:
        text = Path(path).expanduser().read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError("stack", [Problem(field, f"cannot be read: {getattr(e, 'strerror', None) or e}", path,
                                            "give the path of a PEM file on this machine")]) from None
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise ConfigError("stack", [Problem(field, "holds no PEM certificate", path,
                                            "give the certificate in PEM form (-----BEGIN CERTIFICATE-----)")])
    return text


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
