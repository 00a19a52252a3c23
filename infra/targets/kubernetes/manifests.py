"""`inferry render`: the Kubernetes objects of a stack as YAML files, built by the real component under mocks."""
from __future__ import annotations

from typing import Any

import yaml

from infra.stack.config import Deployment
from infra.engines.spec import ServiceSpec
from infra.stack.stackfile import Stack
from infra.targets.kubernetes import offline

ORDER = ["Namespace", "Secret", "ConfigMap", "PersistentVolume", "PersistentVolumeClaim", "Job", "Deployment",
         "Service", "Ingress", "NetworkPolicy", "PodDisruptionBudget", "HorizontalPodAutoscaler", "ScaledObject",
         "ServiceMonitor"]
TOP = ["apiVersion", "kind", "metadata", "type", "spec", "data", "stringData"]


def redacted(d: Deployment) -> dict[str, str]:
    """Stand-ins for every secret: where it comes from, never its value (nothing is read)."""
    return {path: f"<redacted: {ref.describe()}>" for path, ref in d.secret_refs().items()}


def objects(d: Deployment, spec: ServiceSpec, stack: str) -> list[dict[str, Any]]:
    """The manifests the KubernetesTarget component registers for this deployment, in apply order."""
    from infra.targets.kubernetes.component import KubernetesTarget
    from infra.targets.contract import TargetArgs

    args = TargetArgs(deployment=d, spec=spec, secrets=redacted(d))
    captured = offline.capture(lambda: KubernetesTarget("kubernetes", args), stack)
    found = [offline.to_manifest(c) for c in captured if offline.is_kubernetes(c)]
    return sorted(found, key=lambda m: (_rank(m["kind"]), m["metadata"]["name"]))


def _rank(kind: str) -> int:
    return ORDER.index(kind) if kind in ORDER else len(ORDER)


def _ordered(value: Any, top: bool = False) -> Any:
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: (TOP.index(k) if top and k in TOP else len(TOP), k))
        return {k: _ordered(value[k]) for k in keys}
    if isinstance(value, list):
        return [_ordered(v) for v in value]
    return value


def to_yaml(manifest: dict[str, Any]) -> str:
    """Deterministic YAML for one manifest (apiVersion, kind, metadata first; then keys sorted)."""
    return yaml.safe_dump(_ordered(manifest, top=True), sort_keys=False, default_flow_style=False, width=120)


def file_name(index: int, manifest: dict[str, Any]) -> str:
    """NN-kind-name.yaml: `kubectl apply -f DIR` applies them in this order."""
    return f"{index:02d}-{manifest['kind'].lower()}-{manifest['metadata']['name']}.yaml"


SECRET_NOTE = ("# Placeholders, never values: put the real ones in before `kubectl apply`, or create this Secret\n"
               "# with `kubectl create secret generic ... --from-literal=KEY=VALUE` (`inferry up` fills it itself).\n")


def render(d: Deployment, spec: ServiceSpec, stack: str) -> dict[str, str]:
    """File name -> YAML for every object of the deployment (the Secret with placeholders and a note)."""
    return {file_name(i, m): (SECRET_NOTE if m["kind"] == "Secret" else "") + to_yaml(m)
            for i, m in enumerate(objects(d, spec, stack))}


def render_kubernetes(stack: Stack) -> dict[str, str]:
    """The hook of `inferry render`: manifests for a kubernetes stack, nothing for other targets."""
    if stack.deployment.target.kind != "kubernetes":
        return {}
    from infra.targets.kubernetes.checks import refuse_broken_scaling
    from infra.targets.kubernetes.deploy import spec_for

    refuse_broken_scaling(stack.deployment)
    return render(stack.deployment, spec_for(stack.deployment), stack.name)
