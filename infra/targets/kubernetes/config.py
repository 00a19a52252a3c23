"""The `target:` section of a Kubernetes stack: cluster, namespace, replicas, weights delivery, autoscaling."""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Required, TypedDict

from pydantic import Field, field_validator, model_validator

from infra.gateway.config import Limits
from infra.stack.config_targets import DNS1123, INT32_MAX, LABEL_VALUE, QUANTITY, SecretRef, StrictSection, TargetBase

if TYPE_CHECKING:  # the TypedDicts' annotations only: the schema loads without the Pulumi SDK
    import pulumi


# An absolute path of plain parts: it reaches a PersistentVolume and a shell's arguments unchanged.
NODE_PATH = r"^(/[A-Za-z0-9_][A-Za-z0-9._-]*)+$"


class Toleration(StrictSection):
    """A pod toleration (for tainted GPU nodes)."""

    key: str
    operator: Literal["Exists", "Equal"] = "Exists"
    value: str | None = Field(default=None, pattern=LABEL_VALUE)
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None


class Autoscaling(StrictSection):
    """Scale replicas on the engine's request queue."""

    engine: Literal["keda", "hpa"] = "keda"
    min_replicas: int = Field(default=1, ge=0, le=1000)
    max_replicas: int = Field(default=4, ge=1, le=1000)
    queue_target: int = Field(default=5, ge=1, le=INT32_MAX,
                              description="waiting requests per replica before scaling out")
    prometheus_url: str = Field(default="http://prometheus-operated.monitoring.svc:9090", pattern=r"^https?://\S+$")
    scale_to_zero: bool = False
    metric: str | None = Field(default=None, pattern=r"^[a-zA-Z_:][a-zA-Z0-9_:]*$",
                               description="per-pod queue gauge; default vllm:num_requests_waiting for vLLM")
    cooldown_s: int = Field(default=300, ge=0, le=86400, description="seconds of low load before scaling in")
    concurrency_target: int = Field(default=64, ge=1, le=INT32_MAX,
                                    description="scale_to_zero: requests in flight at the gateway per replica")

    @model_validator(mode="after")
    def _bounds(self) -> "Autoscaling":
        if self.min_replicas > self.max_replicas:
            raise ValueError("min_replicas must not exceed max_replicas")
        if self.min_replicas == 0 and not (self.scale_to_zero and self.engine == "keda"):
            raise ValueError("min_replicas 0 needs scale_to_zero: true with engine: keda (a request at the gateway "
                             "wakes a replica)")
        return self


class Ingress(StrictSection):
    """An optional Ingress with TLS."""

    host: str = Field(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    tls_secret: str | None = Field(default=None, pattern=DNS1123)
    class_name: str | None = Field(default=None, pattern=DNS1123)


# inferry's Caddy build (caddy/: the standard modules plus the limits module), as caddy/Dockerfile builds it.
GATEWAY_IMAGE = "ghcr.io/inferry/caddy:2.11.9"
AWS_CLI_IMAGE = "amazon/aws-cli:2.22.0"  # an image with the aws CLI, for stores s5cmd cannot address


class KubeGateway(StrictSection):
    """Caddy in front of the engine pods (infra/gateway/caddy.py): keys and the allowlist at the edge, the engines
    carrying no client key; TLS stays at the Ingress, as clusters do it."""

    image: str = Field(default=GATEWAY_IMAGE, min_length=1, pattern=r"^\S+$", description="inferry's Caddy "
                       "build (caddy/Dockerfile); Caddy's own image serves only with limits.enabled: false")
    replicas: int = Field(default=2, ge=1, le=100, description="gateway pods (two: one may restart while the "
                          "other serves)")
    max_body_mb: int = Field(default=32, ge=1, le=1024, description="largest request body; larger gets 413")
    hold_s: int = Field(default=30, ge=0, le=3600, description="how long a request waits for a ready engine pod "
                        "before 502 (pods restarting, a rolling update)")
    access_log_days: int = Field(default=30, ge=1, le=3650, description="days a gateway pod keeps its access log "
                                 "(method, path, status, size, latency, key id; never bodies, queries or keys)")
    limits: Limits = Field(default_factory=Limits, description="per gateway pod: each counts its own requests")
    scraper_namespace: str = Field(default="monitoring", pattern=DNS1123, description="the namespace whose pods "
                                   "may still reach the engines directly: the metrics scraper's (Prometheus)")
    # CPU nodes by default: nothing of the engine's node_selector or GPU affinity applies to the gateway.
    node_selector: dict[str, str] = Field(default_factory=dict, description="where its pods may run")
    tolerations: list[Toleration] = Field(default_factory=list)


class KubernetesTarget(TargetBase):
    """Deploy onto a Kubernetes cluster with pulumi-kubernetes."""

    kind: Literal["kubernetes"]
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str = Field(default="inferry", pattern=DNS1123)
    create_namespace: bool = True
    replicas: int = Field(default=1, ge=0, le=1000)
    weights_delivery: Literal["init-container", "pvc", "node-cache", "stream"] = "init-container"
    cache_size: str = Field(default="200Gi", description="weights cache size (a Kubernetes quantity); for "
                            "node-cache, the most each node keeps (least recently used models go first)")
    node_cache_path: str = Field(default="/var/lib/inferry/weights", pattern=NODE_PATH,
                                 description="node-cache: the folder on each node that keeps weights across pods "
                                             "(it must exist there: the node's image or its set-up makes it)")
    storage_class: str | None = Field(default=None, pattern=DNS1123)
    gpu_product: str | None = Field(default=None, pattern=LABEL_VALUE, description="nvidia.com/gpu.product label value")
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    autoscaling: Autoscaling | None = None
    ingress: Ingress | None = None
    gateway: KubeGateway | None = None
    pdb_min_available: int | None = Field(default=None, ge=0, le=1000)
    service_monitor: bool = False
    startup_timeout_s: int = Field(default=1800, ge=60, le=INT32_MAX,
                                   description="seconds a rollout may take (image pull and model load)")
    schedule_timeout_s: int = Field(default=900, ge=1, le=INT32_MAX,
                                    description="seconds a replica may wait for a node with its GPUs (a cluster "
                                                "autoscaler adding one) before the rollout fails")
    labels: dict[str, str] = Field(default_factory=dict)
    cpu: str = Field(default="8", description="CPU request per replica (a Kubernetes quantity)")
    memory: str = Field(default="64Gi", description="memory request and limit per replica (a quantity)")
    fetch_image: str = Field(default="peakcom/s5cmd:v2.3.0", min_length=1,
                             description="image with s5cmd (at /s5cmd or on PATH) or the aws CLI, and a POSIX "
                                         f"shell, that fetches weights from the store; e.g. {AWS_CLI_IMAGE}")

    @field_validator("cache_size", "cpu", "memory")
    @classmethod
    def _quantity(cls, v: str) -> str:
        if not re.fullmatch(QUANTITY, v):
            raise ValueError("not a Kubernetes quantity; write e.g. 200Gi, 64Gi, 8 or 500m (no spaces, no 'GB')")
        return v

    @property
    def instances(self) -> int:
        """Engine instances the stack runs: the replicas (the autoscaler's minimum)."""
        return self.autoscaling.min_replicas if self.autoscaling else self.replicas

    @property
    def streams_weights(self) -> bool | None:
        """Whether pods stream weights from the store (weights_delivery: stream)."""
        return self.weights_delivery == "stream"

    def secret_refs(self) -> dict[str, SecretRef]:
        """The target's own secrets: none (the cluster's credentials are the kubeconfig's)."""
        return {}

# The same section as a user's Pulumi program passes it to inferry.Deployment: values may be Outputs
# (tests/component/test_component_args.py keeps these keys those of the models above).
class KubernetesTargetArgs(TypedDict, total=False):
    """`target:` of kind kubernetes; kubeconfig is a file's path or its contents (e.g. a cluster's Output)."""

    kind: Required[Literal["kubernetes"]]
    kubeconfig: pulumi.Input[str]
    context: str
    namespace: str
    create_namespace: bool
    replicas: int
    weights_delivery: Literal["init-container", "pvc", "node-cache", "stream"]
    cache_size: str
    node_cache_path: str
    storage_class: str
    gpu_product: str
    node_selector: Mapping[str, str]
    tolerations: Sequence[Mapping[str, Any]]
    autoscaling: Mapping[str, Any]
    ingress: Mapping[str, Any]
    gateway: Mapping[str, Any]
    pdb_min_available: int
    service_monitor: bool
    startup_timeout_s: int
    schedule_timeout_s: int
    labels: Mapping[str, str]
    cpu: str
    memory: str
    fetch_image: str
