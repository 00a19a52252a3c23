"""DeploymentArgs: the stack file's sections, typed, where every value another resource can make is an Input.

The keys are the stack file's (docs/stack-file.md); the sections without such values (engine, provider,
policy) take the stack's own models or mappings. Secrets are values here (an Input, made secret), not the
stack file's {config: KEY} / {env: VAR} references.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Required, TypedDict, Union

import pulumi

from infra.stack.config import EngineBase, PolicyConfig, ProviderConfig

if TYPE_CHECKING:
    from infra.component.prepare import Prepared

__all__ = ["DeploymentArgs", "KubernetesTargetArgs", "LoadBalancerArgs", "ModelArgs", "ServingArgs", "SshHostArgs", "SshTargetArgs",
           "StorageArgs", "TargetArgs"]


class ModelArgs(TypedDict, total=False):
    """What is served: `model:` of the stack file; hf_token is the token itself."""

    name: Required[str]
    weights: Required[str]
    catalog: str
    architecture: Mapping[str, Any]
    dtype: Literal["auto", "bfloat16", "float16"]
    hf_token: pulumi.Input[str]


class SshHostArgs(TypedDict, total=False):
    """One GPU VM: its address, user and host key may be another resource's Outputs; name is then required
    (it names the host's resources, which must be known before the address is)."""

    address: Required[pulumi.Input[str]]
    name: str
    user: pulumi.Input[str]
    port: int
    host_key: pulumi.Input[str]


class LoadBalancerArgs(TypedDict, total=False):
    """A round-robin nginx on one of the hosts (by name)."""

    host: Required[str]
    port: int


class SshTargetArgs(TypedDict, total=False):
    """`target:` of kind ssh; private_key is the key itself (e.g. a key resource's private_key_openssh)."""

    kind: Required[Literal["ssh"]]
    hosts: Required[Sequence[SshHostArgs]]
    private_key: Required[pulumi.Input[str]]
    known_hosts: str
    trust_on_first_use: bool
    runtime: Literal["docker", "process"]
    install_docker: bool
    weights_cache: str
    service_dir: str
    max_parallel: int
    health_timeout_s: int
    rollout: Literal["rolling", "parallel"]
    max_unavailable: Union[int, str]
    load_balancer: LoadBalancerArgs


class KubernetesTargetArgs(TypedDict, total=False):
    """`target:` of kind kubernetes; kubeconfig is a file's path or its contents (e.g. a cluster's Output)."""

    kind: Required[Literal["kubernetes"]]
    kubeconfig: pulumi.Input[str]
    context: str
    namespace: str
    create_namespace: bool
    replicas: int
    weights_delivery: Literal["init-container", "pvc", "stream"]
    cache_size: str
    storage_class: str
    gpu_product: str
    node_selector: Mapping[str, str]
    tolerations: Sequence[Mapping[str, Any]]
    autoscaling: Mapping[str, Any]
    ingress: Mapping[str, Any]
    pdb_min_available: int
    service_monitor: bool
    startup_timeout_s: int
    schedule_timeout_s: int
    labels: Mapping[str, str]
    cpu: str
    memory: str
    fetch_image: str


TargetArgs = Union[SshTargetArgs, KubernetesTargetArgs]


class StorageArgs(TypedDict, total=False):
    """The S3-compatible weight store: endpoint and bucket may be Outputs (a bucket made by the program)."""

    endpoint: Required[pulumi.Input[str]]
    region: Required[str]
    bucket: Required[pulumi.Input[str]]
    access_key_id: Required[pulumi.Input[str]]
    secret_access_key: Required[pulumi.Input[str]]
    addressing_style: Literal["path", "virtual"]
    force_destroy: bool
    tags: Mapping[str, str]


class ServingArgs(TypedDict, total=False):
    """How clients reach the engine: the port, and the API key they send (the key itself)."""

    api_key: Required[pulumi.Input[str]]
    port: int


@dataclass
class DeploymentArgs:
    """The arguments of inferry's Deployment: the same sections as a stack file's `inferry:deployment`."""

    model: ModelArgs
    engine: EngineBase | Mapping[str, Any]
    target: TargetArgs
    storage: StorageArgs
    provider: ProviderConfig | Mapping[str, Any]
    serving: ServingArgs
    policy: PolicyConfig | Mapping[str, Any] | None = None
    # Set only by from_stack (the stack-file program): the deployment its loader already checked.
    prepared: "Prepared | None" = field(default=None, init=False, repr=False)

    @classmethod
    def from_stack(cls, prepared: "Prepared") -> "DeploymentArgs":
        """Args for a deployment a stack file holds, checked by its loader (infra.program)."""
        args = cls.__new__(cls)
        args.prepared = prepared
        return args
