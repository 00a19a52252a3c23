"""The typed stack configuration: the `inferry:deployment` object of a stack file."""
from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from infra.stack.location import WeightsLocation
from infra.stack.secretfix import SecretField
from infra.stack.config_engines import EngineBase, TrtllmEngine, VllmEngine
from infra.stack.config_targets import STRICT, SecretRef, TargetBase
from infra.stack.kinds import EngineSection, TargetSection
from infra.stack.storenames import BUCKET_NAME, endpoint_problem  # a leaf the weights commands import without pydantic
from infra.stack.config_model import Adapter, Architecture, ModelConfig, Strict

__all__ = [
    "Deployment", "ModelConfig", "Architecture", "Adapter", "StorageConfig", "ProviderConfig", "DeclaredGpu",
    "ServingConfig", "PolicyConfig", "SecretRef", "EngineBase", "VllmEngine",
    "TrtllmEngine", "TargetBase",
]

class StorageConfig(Strict):
    """An S3-compatible weight store at any endpoint."""

    endpoint: str = Field(description="S3 endpoint URL")
    region: str = Field(min_length=1)
    bucket: str = Field(pattern=BUCKET_NAME, description="an S3 bucket name: 3-63 lowercase letters, digits, '.' or '-'")
    addressing_style: Literal["path", "virtual"] = "path"
    access_key_id: SecretRef
    secret_access_key: SecretRef
    # Keys that can only read, for what serves (pods, engines streaming from the store): the keys above push.
    read_access_key_id: SecretRef | None = None
    read_secret_access_key: SecretRef | None = None
    force_destroy: bool = False
    tags: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _read_pair(self) -> "StorageConfig":
        if (self.read_access_key_id is None) != (self.read_secret_access_key is None):
            raise ValueError("give both read_access_key_id and read_secret_access_key (a read-only key pair), or "
                             "neither")
        return self

    @property
    def serving_keys(self) -> tuple[tuple[str, SecretRef], tuple[str, SecretRef]]:
        """(field, reference) of the access key and the secret key what serves reads the store with: the
        read-only pair when given, else the pair that pushes."""
        if self.read_access_key_id is not None and self.read_secret_access_key is not None:
            return ((SecretField.S3_READ_ACCESS, self.read_access_key_id),
                    (SecretField.S3_READ_SECRET, self.read_secret_access_key))
        return (SecretField.S3_ACCESS, self.access_key_id), (SecretField.S3_SECRET, self.secret_access_key)

    @property
    def serving_key_fields(self) -> tuple[str, str]:
        """The secret fields of serving_keys."""
        return self.serving_keys[0][0], self.serving_keys[1][0]

    @field_validator("endpoint")
    @classmethod
    def _endpoint_url(cls, v: str) -> str:
        problem = endpoint_problem(v)
        if problem:
            raise ValueError(problem)
        return v


ONE_LINE = r"^[^\s\x00-\x1f\x7f](?:[^\x00-\x1f\x7f]{0,198}[^\s\x00-\x1f\x7f])?$"


class DeclaredGpu(Strict):
    """A GPU the catalog lacks, declared in the stack with the figures a catalog row holds."""

    name: str = Field(pattern=ONE_LINE, description="a name for it on one printable line, e.g. RTX-PRO-6000",
                      json_schema_extra={"fix": "write it on one line, without leading or trailing spaces"})
    product_names: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        min_length=1, description="the exact `nvidia-smi --query-gpu=name` strings of this GPU")
    memory_mib: int = Field(gt=0, le=16 * 1024 * 1024,
                            description="memory as `nvidia-smi --query-gpu=memory.total` prints it, in MiB")
    bandwidth_tbps: float = Field(gt=0, le=1000, description="the vendor's peak memory bandwidth in TB/s")
    compute_capability: str = Field(pattern=r"^[0-9]{1,2}\.[0-9]$", description="a compute capability such as 9.0",
                                    json_schema_extra={"fix": "write it quoted, as nvidia-smi's compute_cap "
                                                       "prints it, e.g. \"9.0\""})
    fp8: bool = Field(description="FP8 tensor cores (Ada, Hopper and newer)")
    fp4: bool = False
    architecture: Literal["ampere", "ada", "hopper", "blackwell"] | None = None


def _gpu_form(v: object) -> str:
    # A mapping is a declared GPU; anything else is checked as a catalog name (errors name one form only).
    return "declared" if isinstance(v, (dict, DeclaredGpu)) else "catalog"


GpuField = Annotated[Union[Annotated[str, Tag("catalog")], Annotated[DeclaredGpu, Tag("declared")]],
                     Discriminator(_gpu_form)]


class ProviderConfig(Strict):
    """Who rents the GPUs, where, and at what price."""

    # Both are printed in plan tables and outputs: one printable line, no edge spaces (a newline would forge lines).
    name: str = Field(pattern=ONE_LINE, description="the provider's name on one printable line, up to 200 characters",
                      json_schema_extra={"fix": "write it on one line, without leading or trailing spaces"})
    region: str = Field(pattern=ONE_LINE, description="a region name on one printable line, e.g. es-madrid",
                        json_schema_extra={"fix": "write it on one line, without leading or trailing spaces"})
    gpu: GpuField = Field(description="a catalog GPU key such as H100-80GB, or a GPU declared as a mapping")
    gpu_count: int = Field(default=1, ge=1, le=64, description="GPUs per host or replica")
    price_per_gpu_hour: float = Field(ge=0, le=1e6)
    egress_per_gb: float = Field(default=0.0, ge=0, le=1e6)
    tokens_per_second: float | None = Field(default=None, gt=0, le=1e9,
                                            description="output tokens/s per replica, if known")

    @field_validator("gpu")
    @classmethod
    def _gpu_name(cls, v: str | DeclaredGpu) -> str | DeclaredGpu:
        if isinstance(v, str) and not v.strip():
            raise ValueError("expected a catalog GPU key such as H100-80GB, or a mapping that declares the GPU")
        return v

    @property
    def gpu_name(self) -> str:
        """The GPU's name: the catalog key, or the declared GPU's name."""
        return self.gpu if isinstance(self.gpu, str) else self.gpu.name


class ServingConfig(Strict):
    """How clients reach the engine."""

    port: int = Field(default=8000, ge=1, le=65535)
    api_key: SecretRef
    # Rotation without a failed request: the gateway accepts both keys until this one is removed.
    previous_api_key: SecretRef | None = Field(default=None, description="a second key the gateway still "
                                               "accepts while clients move to api_key (rotation)")
    # Off unless the stack says so: engine options that log prompts or outputs are refused without it.
    log_prompts: bool = Field(default=False, description="allow the engine to log prompts and outputs "
                              "(its request-logging options); the record of processing says so")


class PolicyConfig(Strict):
    """Rules the deployment must obey, such as data residency."""

    residency: Literal["eu"] | None = None
    allowed_regions: list[str] = Field(default_factory=list)
    # None: no allowlist. A list: every party the deployment's data or downloads reach must be on it (validate,
    # `inferry record --check`): the provider's name, the store's host, the image registry, huggingface.co, ...
    sub_processors: list[Annotated[str, Field(pattern=ONE_LINE)]] | None = Field(
        default=None, description="the sub-processors allowed: provider names and hosts (e.g. docker.io)")


class Deployment(Strict):
    """The whole deployment: one per stack file."""

    # Built on first use: the engine sections are the ones registered by then (infra/stack/kinds.py).
    model_config = ConfigDict(**STRICT, populate_by_name=True, defer_build=True)

    model: ModelConfig
    engine: Annotated[EngineBase, EngineSection()]
    target: Annotated[TargetBase, TargetSection()]
    storage: StorageConfig
    provider: ProviderConfig
    serving: ServingConfig
    policy: PolicyConfig = Field(default_factory=PolicyConfig)

    @property
    def weights_location(self) -> WeightsLocation | None:
        """The model's folder in this stack's store (storage.bucket); None for a path on the host."""
        prefix = self.model.weights_prefix
        return None if prefix is None else WeightsLocation(self.storage.bucket, prefix)

    @property
    def weights_uri(self) -> str:
        """Where the weights are, as engines take it: s3://STORAGE.BUCKET/PREFIX, or the path on the host."""
        loc = self.weights_location
        return self.model.weights if loc is None else loc.uri

    def secret_refs(self) -> dict[str, SecretRef]:
        """Every secret reference in the deployment, by field path."""
        refs = {
            SecretField.S3_ACCESS: self.storage.access_key_id,
            SecretField.S3_SECRET: self.storage.secret_access_key,
            SecretField.API_KEY: self.serving.api_key,
        }
        if self.model.hf_token is not None:
            refs[SecretField.HF_TOKEN] = self.model.hf_token
        if self.serving.previous_api_key is not None:
            refs[SecretField.PREVIOUS_API_KEY] = self.serving.previous_api_key
        if self.storage.read_access_key_id is not None and self.storage.read_secret_access_key is not None:
            refs[SecretField.S3_READ_ACCESS] = self.storage.read_access_key_id
            refs[SecretField.S3_READ_SECRET] = self.storage.read_secret_access_key
        return {**refs, **self.target.secret_refs()}
