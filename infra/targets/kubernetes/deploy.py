"""The program's Kubernetes branch: the engine's ServiceSpec and the stack's secrets into a KubernetesTarget."""
from __future__ import annotations

from typing import Any

from infra.stack.config import Deployment
from infra.engines.spec import ServiceSpec
from infra.stack.stackfile import Stack


def spec_for(d: Deployment) -> ServiceSpec:
    """The engine's ServiceSpec with container paths, exactly as the SSH target's docker runtime builds it."""
    from infra.engines import service_spec

    return service_spec(d)


def deploy(stack: Stack) -> dict[str, Any]:
    """Create the KubernetesTarget for a stack; returns its exports (endpoint, endpoints)."""
    from infra.stack import secrets
    from infra.targets.kubernetes.checks import refuse_broken_scaling
    from infra.targets.kubernetes.component import KubernetesTarget
    from infra.targets.contract import TargetArgs

    d = stack.deployment
    refuse_broken_scaling(d)
    values = {path: secrets.output(ref, path) for path, ref in d.secret_refs().items()}
    target = KubernetesTarget("kubernetes", TargetArgs(deployment=d, spec=spec_for(d), secrets=values))
    return {"endpoint": target.endpoint, "endpoints": target.endpoints, "served_model": target.model}
