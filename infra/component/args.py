"""DeploymentArgs: the stack file's sections, typed, where every value another resource can make is an Input.

The keys are the stack file's (docs/stack-file.md); the sections without such values (engine, provider,
policy) take the stack's own models or mappings. Secrets are values here (an Input, made secret), not the
stack file's {config: KEY} / {env: VAR} references.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Required, TypedDict, Union

import pulumi

from infra.stack.config import EngineBase, PolicyConfig, ProviderConfig, TargetBase

if TYPE_CHECKING:
    from infra.component.prepared import Prepared

__all__ = ["DeploymentArgs", "ModelArgs", "ServingArgs", "StorageArgs", "TargetArgs"]


class ModelArgs(TypedDict, total=False):
    """What is served: `model:` of the stack file; hf_token is the token itself."""

    name: Required[str]
    weights: Required[str]
    catalog: str
    architecture: Mapping[str, Any]
    dtype: Literal["auto", "bfloat16", "float16"]
    hf_token: pulumi.Input[str]


# A `target:` section as its target's TypedDict gives it (SshTargetArgs, KubernetesTargetArgs, ... each in its
# target's config module, beside the model that checks it), or the model itself.
TargetArgs = Union[TargetBase, Mapping[str, Any]]


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
