"""The program's Kubernetes branch: the engine's ServiceSpec and the stack's secrets into a KubernetesTarget."""
from __future__ import annotations

from typing import Any

from infra.stack.config import Deployment
from infra.engines.spec import ServiceSpec
from infra.targets.contract import DeployRequest


def spec_for(d: Deployment) -> ServiceSpec:
    """The engine's ServiceSpec with container paths, exactly as the SSH target's docker runtime builds it; behind
    the gateway without the client key (the gateway checks it, and removes it, so no engine logs one)."""
    from dataclasses import replace

    from infra.engines import service_spec
    from infra.stack.secretfix import SecretField

    spec = service_spec(d)
    if getattr(d.target, "gateway", None) is None:
        return spec
    return replace(spec, env=tuple(e for e in spec.env if e.secret_field != SecretField.API_KEY))


def deploy(req: DeployRequest) -> dict[str, Any]:
    """Create the KubernetesTarget of a deployment; returns its exports (endpoint, endpoints, served_model)."""
    from infra.targets.kubernetes.checks import refuse_broken_scaling
    from infra.targets.kubernetes.component import KubernetesTarget
    from infra.targets.contract import TargetArgs

    d = req.deployment
    refuse_broken_scaling(d)
    args = TargetArgs(deployment=d, spec=spec_for(d), secrets=req.secrets, fill=req.fill)
    target = KubernetesTarget(req.name, args, req.opts)
    return {"endpoint": target.endpoint, "endpoints": target.endpoints, "served_model": target.model}
