"""ServiceSpec <-> plain data, so the spec travels as a provider input (secrets by reference only)."""
from __future__ import annotations

import dataclasses
from typing import Any

from infra.stack.config import SecretRef
from infra.engines.spec import BuildStep, EnvVar, ServiceSpec, SpecFile


def to_data(spec: ServiceSpec) -> dict[str, Any]:
    """Plain JSON-able data; EnvVar secrets stay references (where the value comes from, never the value)."""
    d = dataclasses.asdict(spec)
    d["env"] = [{"name": e.name, "value": e.value, "secret_field": e.secret_field,
                 "secret": e.secret.model_dump(exclude_none=True) if e.secret else None} for e in spec.env]
    d["extra_weights"] = [list(x) for x in spec.extra_weights]
    if not d["bind"]:
        del d["bind"]  # no gateway: the data stays what it was before gateways (no diff)
    return d


def from_data(d: dict[str, Any]) -> ServiceSpec:
    """The inverse of to_data (numbers may arrive as floats from Pulumi)."""
    fields = {f.name for f in dataclasses.fields(ServiceSpec)}
    kw = {k: v for k, v in d.items() if k in fields}
    kw["command"], kw["args"] = tuple(d["command"]), tuple(d["args"])
    kw["env"] = tuple(EnvVar(e["name"], e.get("value"), SecretRef(**e["secret"]) if e.get("secret") else None,
                             e.get("secret_field")) for e in d.get("env") or [])
    kw["files"] = tuple(SpecFile(f["name"], f["content"], f["mount_path"], int(f.get("mode", 0o644)))
                        for f in d.get("files") or [])
    kw["build"] = BuildStep(**d["build"]) if d.get("build") else None
    kw["extra_weights"] = tuple(tuple(x) for x in d.get("extra_weights") or [])
    for k in ("port", "gpus"):
        kw[k] = int(d[k])
    if d.get("engine_port") is not None:
        kw["engine_port"] = int(d["engine_port"])
    return ServiceSpec(**kw)
