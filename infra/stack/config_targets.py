"""Target sections of the stack file (ssh, kubernetes) and the secret reference type."""
from __future__ import annotations

import re
from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from infra.stack.secretfix import SecretField

# Kubernetes naming (DNS-1123 label) and label-value rules.
DNS1123 = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"
QUANTITY = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$"  # resource.Quantity, without exponents
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
CONFIG_KEY = r"^[A-Za-z][A-Za-z0-9_.\-]*$"
# Counts and sizes past a C int are typos, and engines parse them as C ints (or overflow turning them to float).
INT32_MAX = 2**31 - 1
SHARE = re.compile(r"([1-9][0-9]?|100)%")
# Every section: unknown keys are errors and values are never converted (strict): "8000" is not a port,
# 1 and "off" are not booleans, 2.0 is not a count. NaN and infinities are refused. A stack file read by
# Pulumi (JSON from pulumi.Config) and by the CLI (YAML 1.2) reaches these models with the same types.
STRICT = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class _Strict(BaseModel):
    """Base for target sections: unknown keys are errors, values are not coerced (see STRICT)."""

    model_config = STRICT


class SecretRef(_Strict):
    """Where a secret comes from: a Pulumi secret config key, or an environment variable."""

    config: str | None = Field(default=None, pattern=CONFIG_KEY, description="key of a `secure:` value, e.g. s3SecretKey")
    env: str | None = Field(default=None, pattern=ENV_NAME, description="environment variable name")

    @model_validator(mode="after")
    def _exactly_one(self) -> "SecretRef":
        if (self.config is None) == (self.env is None):
            raise ValueError("give exactly one of 'config' (a Pulumi secret key) or 'env' (a variable name)")
        return self

    def describe(self) -> str:
        """Where the secret is read from, never its value."""
        return f"secret config inferry:{self.config}" if self.config else f"environment variable {self.env}"


# A host path that reaches shell, compose, YAML, systemd and nginx files: characters none of them reads as syntax.
SAFE_PATH = r"^/[A-Za-z0-9._@+=,~/-]*$"
SAFE_PATH_TEXT = ("an absolute path of letters, digits and . _ - @ + = , ~ / only (no spaces, quotes, ';', '$', "
                  "':' or other characters a shell, nginx, compose or systemd file would read as syntax)")


class SshHost(_Strict):
    """One GPU VM reachable over SSH."""

    address: str = Field(min_length=1, pattern=r"^[A-Za-z0-9.\-:\[\]]+$")
    user: str = Field(default="root", pattern=r"^[a-z_][a-z0-9_\-]{0,31}$")
    port: int = Field(default=22, ge=1, le=65535)
    name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,62}$")
    host_key: str | None = Field(default=None, pattern=r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/=]+$",
                                 description="pinned public host key, 'TYPE BASE64'")

    @property
    def label(self) -> str:
        """How the host is named in messages and resource names."""
        return self.name or self.address


class LoadBalancer(_Strict):
    """A round-robin nginx in front of the replicas, on one of the hosts."""

    host: str = Field(description="name or address of one of target.hosts")
    port: int = Field(default=8080, ge=1, le=65535)


class SshTarget(_Strict):
    """Provision one or more VMs over SSH; each host is a replica."""

    kind: Literal["ssh"]
    hosts: list[SshHost] = Field(min_length=1)
    private_key: SecretRef
    known_hosts: str | None = Field(default=None, description="known_hosts file; default ~/.ssh/known_hosts")
    trust_on_first_use: bool = False
    runtime: Literal["docker", "process"] = "docker"
    install_docker: bool = False
    weights_cache: str = Field(default="/var/lib/inferry/weights", pattern=SAFE_PATH, description=SAFE_PATH_TEXT)
    # It lands in shell commands (quoted), the compose file (where '$' interpolates and ':' splits a volume),
    # YAML, and the nginx config that runs as root (where ';' ends a directive and starts the next): an allowlist
    # of characters none of them reads as syntax, not a list of the ones someone thought of.
    service_dir: str = Field(default="/etc/inferry", pattern=SAFE_PATH, description=SAFE_PATH_TEXT)
    # Hosts worked on at once by this machine (SSH sessions and threads; weights go host <- store directly).
    max_parallel: int = Field(default=64, ge=1, le=256)
    health_timeout_s: int = Field(default=900, ge=5, le=INT32_MAX)
    rollout: Literal["rolling", "parallel"] = Field(
        default="rolling", description="rolling: one replica's engine is changed at a time, each healthy before the "
        "next, and a failure stops the rollout with the others untouched; parallel: all at once (a faster first "
        "apply, but a bad change restarts every replica)")
    # Engines restarting at once in a rolling update (Kubernetes' maxUnavailable): a count, or a share of the hosts
    # (rounded down, at least 1): the others keep serving behind the load balancer throughout.
    max_unavailable: Union[int, str] = Field(default=1, description="a count of hosts (e.g. 4) or a share of "
                                             "them (e.g. 25%)")
    load_balancer: LoadBalancer | None = None


    @field_validator("max_unavailable", mode="before")
    @classmethod
    def _count_or_share(cls, v: object) -> object:
        ok = (type(v) is int and 1 <= v <= INT32_MAX) or (isinstance(v, str) and SHARE.fullmatch(v))
        if not ok:
            raise ValueError("expected a count of hosts (1 or more) or a share of them from 1% to 100%, e.g. 25%")
        return v
    @model_validator(mode="after")
    def _unique_hosts(self) -> "SshTarget":
        labels = [h.label for h in self.hosts]
        dupes = sorted({x for x in labels if labels.count(x) > 1})
        if dupes:
            raise ValueError(f"host names must be unique; repeated: {', '.join(dupes)}")
        if self.load_balancer and self.load_balancer.host not in labels + [h.address for h in self.hosts]:
            raise ValueError(f"load_balancer.host {self.load_balancer.host!r} is not one of target.hosts")
        return self

    @property
    def instances(self) -> int:
        """Engine instances the stack runs: one per host."""
        return len(self.hosts)

    @property
    def streams_weights(self) -> bool | None:
        """Whether the target asks the engine to stream weights from the store (None: it has no say)."""
        return None

    def secret_refs(self) -> dict[str, SecretRef]:
        """The target's own secrets, by field path: the SSH private key."""
        return {SecretField.PRIVATE_KEY: self.private_key}


class Toleration(_Strict):
    """A pod toleration (for tainted GPU nodes)."""

    key: str
    operator: Literal["Exists", "Equal"] = "Exists"
    value: str | None = Field(default=None, pattern=LABEL_VALUE)
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None


class Autoscaling(_Strict):
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
                                    description="scale_to_zero: in-flight requests per replica")
    interceptor_host: str = Field(default="keda-add-ons-http-interceptor-proxy.keda.svc.cluster.local",
                                  pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
                                  description="scale_to_zero: the KEDA HTTP add-on interceptor Service")
    interceptor_port: int = Field(default=8080, ge=1, le=65535)

    @model_validator(mode="after")
    def _bounds(self) -> "Autoscaling":
        if self.min_replicas > self.max_replicas:
            raise ValueError("min_replicas must not exceed max_replicas")
        if self.min_replicas == 0 and not (self.scale_to_zero and self.engine == "keda"):
            raise ValueError("min_replicas 0 needs scale_to_zero: true with engine: keda (the HTTP add-on wakes a replica)")
        return self


class Ingress(_Strict):
    """An optional Ingress with TLS."""

    host: str = Field(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    tls_secret: str | None = Field(default=None, pattern=DNS1123)
    class_name: str | None = Field(default=None, pattern=DNS1123)


class KubernetesTarget(_Strict):
    """Deploy onto a Kubernetes cluster with pulumi-kubernetes."""

    kind: Literal["kubernetes"]
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str = Field(default="inferry", pattern=DNS1123)
    create_namespace: bool = True
    replicas: int = Field(default=1, ge=0, le=1000)
    weights_delivery: Literal["init-container", "pvc", "stream"] = "init-container"
    cache_size: str = Field(default="200Gi", description="weights cache size (a Kubernetes quantity)")
    storage_class: str | None = Field(default=None, pattern=DNS1123)
    gpu_product: str | None = Field(default=None, pattern=LABEL_VALUE, description="nvidia.com/gpu.product label value")
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    autoscaling: Autoscaling | None = None
    ingress: Ingress | None = None
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
    fetch_image: str = Field(default="amazon/aws-cli:2.22.0", min_length=1,
                             description="image with the aws CLI that fetches weights from the store")

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


TargetConfig = SshTarget | KubernetesTarget
