"""Provider inputs (plain dicts, as Pulumi carries them) <-> the typed arguments of each step."""
from __future__ import annotations

import dataclasses
from typing import Any

from infra.targets.ssh.files import RemoteFile
from infra.targets.ssh.host import HostArgs
from infra.gateway.caddy import GatewayPlan
from infra.targets.ssh.gateway import GatewayArgs
from infra.targets.ssh.pool import Conn
from infra.targets.ssh.service import ServiceArgs
from infra.targets.ssh.weights import Store, WeightsArgs


def asdict(report: Any) -> dict:
    """A step's report as provider outputs."""
    return dataclasses.asdict(report)


def host_args(p: dict) -> HostArgs:
    """HostProvider inputs -> HostArgs."""
    return HostArgs(Conn.from_dict(p["conn"]), str(p["gpu"]), int(p["gpu_count"]), str(p["engine"]),
                    str(p["runtime"]), bool(p["install_docker"]), str(p["weights_cache"]),
                    tuple(str(n) for n in p.get("gpu_names") or ()), str(p.get("cuda") or ""),
                    bool(p.get("gateway_limits", False)))


def weights_args(p: dict) -> WeightsArgs:
    """WeightsProvider inputs -> WeightsArgs."""
    st = p["store"]
    store = Store(st["endpoint"], st["region"], st["bucket"], st["prefix"], st.get("addressing_style", "path"))
    return WeightsArgs(Conn.from_dict(p["conn"]), store, str(p["model_dir"]), int(p.get("parallel", 8)), bool(p.get("trt_build", False)), str(p["ops_log"]),
                       bool(p.get("keep_on_destroy", False)))


def service_args(p: dict) -> ServiceArgs:
    """ServiceProvider inputs -> ServiceArgs."""
    files = tuple(RemoteFile(f["path"], f["content"], int(f.get("mode", 0o644))) for f in p.get("files") or [])
    return ServiceArgs(Conn.from_dict(p["conn"]), str(p["runtime"]), str(p["service_dir"]), files,
                       dict(p["spec"]), int(p.get("health_timeout_s", 900)), str(p.get("depends", "")),
                       str(p.get("public_address", "")), str(p.get("bind", "")))


def gateway_args(p: dict) -> GatewayArgs:
    """GatewayProvider inputs -> GatewayArgs."""
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in dict(p["plan"]).items()}
    # Pulumi hands numbers back as floats; Caddy refuses 30.0 where its config wants an integer.
    ints = {f.name for f in dataclasses.fields(GatewayPlan) if f.type in (int, "int")}
    plan = GatewayPlan(**{k: int(v) if k in ints else v for k, v in fields.items()})
    return GatewayArgs(Conn.from_dict(p["conn"]), plan, str(p.get("model", "")), str(p.get("public_address", "")))


def props_of(a: Any) -> dict:
    """Typed step arguments -> provider inputs (the inverse of the functions above)."""
    d = dataclasses.asdict(a)
    d["conn"] = a.conn.to_dict()
    if "files" in d:
        d["files"] = [{"path": f.path, "content": f.content, "mode": f.mode} for f in a.files]
    for k in ("upstreams", "gpu_names"):
        if k in d:
            d[k] = list(d[k])
    if "plan" in d:
        d["plan"] = {k: list(v) if isinstance(v, tuple) else v for k, v in d["plan"].items()}
    if d.get("bind") == "":
        del d["bind"]  # no gateway: the inputs stay what they were before gateways (no diff)
    if d.get("gpu_names") == []:
        del d["gpu_names"]  # a catalog GPU: the inputs stay what they were before declared GPUs (no diff)
    if d.get("gateway_limits") is False:
        del d["gateway_limits"]  # not the gateway's host: the inputs stay what they were before limits (no diff)
    return d
