"""What every Kubernetes object builder needs: the deployment, its target section, the engine spec, names."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra.stack.config import Deployment
from infra.targets.kubernetes.config import KubernetesTarget as TargetSection
from infra.engines.spec import ServiceSpec
from infra.targets.kubernetes import names

SCRIPTS_DIR = "/opt/inferry"  # where the ConfigMap's helper scripts are mounted in init containers
# Before a pod is stopped (a rollout, a scale-in), it keeps serving while the Service takes it out: removing an
# endpoint reaches every node's kube-proxy (and an ingress controller) a few seconds after the kubelet would send
# the engine SIGTERM, and requests routed there meanwhile were refused (seen on the real node: 7 of 1117 during a
# rolling update). The kubelet's own sleep action needs no binary in the image (Kubernetes 1.30+).
DRAIN_S = 10
DRAIN = {"preStop": {"sleep": {"seconds": DRAIN_S}}}


@dataclass(frozen=True)
class Ctx:
    """Derived names and sections for one deployment on one cluster."""

    d: Deployment
    spec: ServiceSpec

    @property
    def t(self) -> TargetSection:
        """The kubernetes target section."""
        assert isinstance(self.d.target, TargetSection)
        return self.d.target

    @property
    def name(self) -> str:
        """Name of the Deployment, the Service and the prefix of every other object."""
        return names.app_name(self.d)

    @property
    def ns(self) -> str:
        """The namespace everything lives in."""
        return self.t.namespace

    @property
    def secret_name(self) -> str:
        """The Secret holding S3 keys, API key and HF token."""
        return f"{self.name}-secrets"

    @property
    def config_name(self) -> str:
        """The ConfigMap holding engine files and the weight scripts."""
        return f"{self.name}-config"

    @property
    def wants_weights_volume(self) -> bool:
        """True when the pod fetches weights itself (not when the engine streams them)."""
        return not self.spec.streams_weights and self.t.weights_delivery != "stream"

    @property
    def scales_to_zero(self) -> bool:
        """True when KEDA may take the engine to zero pods, woken by requests the gateway holds meanwhile."""
        a = self.t.autoscaling
        return a is not None and a.engine == "keda" and a.scale_to_zero

    @property
    def selector(self) -> dict[str, str]:
        """Labels that select the serving pods only (not the build Job's)."""
        return {**names.selector_labels(self.d), "app.kubernetes.io/component": "engine"}

    def labels(self, component: str) -> dict[str, str]:
        """Labels for one object of this deployment."""
        return names.common_labels(self.d, self.spec.engine, component)

    def meta(self, name: str, component: str, **extra: Any) -> dict[str, Any]:
        """Object metadata: name, namespace, labels."""
        return {"name": name, "namespace": self.ns, "labels": self.labels(component), **extra}

    def secret_ref(self, env_name: str, field: str) -> dict[str, Any]:
        """An env var read from this deployment's Secret (the value never appears in a manifest)."""
        return {"name": env_name, "valueFrom": {"secretKeyRef": {"name": self.secret_name, "key": field}}}
