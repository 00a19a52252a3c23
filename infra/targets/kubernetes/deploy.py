"""The program's Kubernetes branch: the engine's ServiceSpec and the stack's secrets into a KubernetesTarget."""
from __future__ import annotations

from typing import Any

from infra.stack.config import Deployment
from infra.engines.spec import ServiceSpec
from infra.targets.contract import DeployRequest


def spec_for(d: Deployment) -> ServiceSpec:
    """The engine's ServiceSpec with container paths, exactly as the SSH target's docker runtime builds it."""
    from infra.engines import service_spec

    return service_spec(d)


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
