"""The model section of a stack file, typed: what is served, where its weights and its LoRA adapters live."""
from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from infra.stack.location import WeightsLocation
from infra.stack.config_targets import INT32_MAX, STRICT, SecretRef
from infra.stack.storenames import BUCKET_NAME

# A served model name ends up in URLs, labels and file names: keep it boring.
SERVED_NAME = r"^[A-Za-z0-9][A-Za-z0-9._\-/]{0,127}$"


class Strict(BaseModel):
    """Base for every section: unknown keys are errors, values are never coerced ("8000" is not a port)."""

    model_config = ConfigDict(**STRICT, populate_by_name=True)


class Architecture(Strict):
    """A model's shape, for sizing when neither config.json nor the catalog knows it."""

    num_layers: int = Field(gt=0, le=INT32_MAX)
    num_attention_heads: int = Field(gt=0, le=INT32_MAX)
    num_kv_heads: int = Field(gt=0, le=INT32_MAX)
    head_dim: int = Field(gt=0, le=INT32_MAX)
    hidden_size: int = Field(gt=0, le=INT32_MAX)
    vocab_size: int = Field(gt=0, le=INT32_MAX)
    max_context: int = Field(gt=0, le=INT32_MAX)
    num_params: float = Field(gt=0, le=1e15, description="total parameters, e.g. 8.03e9")
    intermediate_size: int | None = Field(default=None, gt=0, le=INT32_MAX)
    num_experts: int | None = Field(default=None, gt=0, le=INT32_MAX)
    num_experts_per_token: int | None = Field(default=None, gt=0, le=INT32_MAX)
    kv_lora_rank: int | None = Field(default=None, gt=0, le=INT32_MAX, description="MLA latent rank")
    qk_rope_head_dim: int | None = Field(default=None, gt=0, le=INT32_MAX, description="MLA rope dim")


class Adapter(Strict):
    """One LoRA adapter: the name clients ask for instead of the model's, and its folder in the stack's bucket."""

    name: str = Field(pattern=SERVED_NAME, description="the adapter's model name in requests")
    weights: str = Field(description="the adapter's key prefix in this stack's bucket (storage.bucket), "
                                     "e.g. adapters/sql-lora: a folder with adapter_config.json")
    # In the stack, not only in the store: the engine's rank limit (--max-lora-rank) is rendered from it offline,
    # and validate --from-store checks it against the adapter's adapter_config.json (its `r`).
    rank: int = Field(gt=0, le=INT32_MAX, description="the adapter's LoRA rank (adapter_config.json's r)")

    @field_validator("weights")
    @classmethod
    def _in_the_store(cls, v: str) -> str:
        _one_line(v)
        if v.startswith("/"):
            raise ValueError("expected a key prefix inside storage.bucket such as adapters/sql-lora: an adapter is "
                             "fetched from the store like the model, not read from a path on the host")
        problem = _prefix_problem(v.rstrip("/"), "adapters/sql-lora")
        if problem:
            raise ValueError(problem)
        return v.rstrip("/")


class ModelConfig(Strict):
    """What is served: the name clients ask for and where the weights live."""

    name: str = Field(pattern=SERVED_NAME, description="served model name: letters, digits, '.', '_', '-', '/'")
    weights: str = Field(description="the model's key prefix in this stack's bucket (storage.bucket), e.g. "
                                     "llama-3.1-8b-instruct, or an absolute path on the host")
    catalog: str | None = Field(default=None, description="catalog architecture key, when it differs from name")
    architecture: Architecture | None = None
    dtype: Literal["auto", "bfloat16", "float16"] = "auto"
    hf_token: SecretRef | None = None
    adapters: list[Adapter] = Field(default_factory=list, description="LoRA adapters served on this model "
                                    "(docs/lora.md); each is fetched and verified like the model's weights")
    adapter_slots: int | None = Field(default=None, gt=0, le=1024, description="adapters in one batch on the "
                                      "GPU (vLLM --max-loras, SGLang --max-loras-per-batch); default: all of them")

    @field_validator("weights")
    @classmethod
    def _weights_location(cls, v: str) -> str:
        _one_line(v)
        if v.startswith("/"):
            if len(v.encode()) > 4000 or any(len(part.encode()) > 255 for part in v.split("/")):
                raise ValueError("longer than a path can be (4000 bytes, 255 per folder name)")
            return v
        if v.startswith("s3://"):  # the old form; check_bucket requires BUCKET to be storage.bucket
            bucket, _, prefix = v[5:].partition("/")
            if not re.fullmatch(BUCKET_NAME, bucket) or not prefix.strip("/"):
                raise ValueError(_prefix_problem(""))
        else:
            prefix = v
        problem = _prefix_problem(prefix.rstrip("/"))
        if problem:
            raise ValueError(problem)
        return v.rstrip("/")

    @model_validator(mode="after")
    def _adapters_apart(self) -> ModelConfig:
        names = [a.name for a in self.adapters]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"adapters: the name {twice[0]!r} is given twice; give each adapter its own name")
        if self.model_name_clash():
            raise ValueError(f"adapters: {self.name!r} is the served model's own name (model.name); a client "
                             "names an adapter instead of the model, so give the adapter another name")
        if self.adapter_slots is not None and not self.adapters:
            raise ValueError("adapter_slots: set only with model.adapters")
        return self

    def model_name_clash(self) -> bool:
        """Whether an adapter is named like the served model."""
        return any(a.name == self.name for a in self.adapters)

    @property
    def slots(self) -> int:
        """Adapters the engine keeps on the GPU at once: adapter_slots, else every adapter (0 without any)."""
        return self.adapter_slots or len(self.adapters)

    @property
    def in_store(self) -> bool:
        """True when the weights are in the stack's weight store (not a path on the host)."""
        return not self.weights.startswith("/")

    @property
    def legacy_bucket(self) -> str | None:
        """The bucket an old-style s3://BUCKET/PREFIX location names; None for a key prefix or a path."""
        old = WeightsLocation.parse(self.weights)
        return old.bucket if old is not None else None

    @property
    def weights_prefix(self) -> str | None:
        """The key prefix (the model folder) inside the stack's bucket; None for a path on the host."""
        old = WeightsLocation.parse(self.weights)
        if old is not None:
            return old.prefix
        return None if self.weights.startswith("/") else self.weights


def _one_line(v: str) -> None:
    """A location reaches fetch scripts and manifests line by line: no control characters in it."""
    if any(ord(c) < 32 or ord(c) == 127 for c in v):
        raise ValueError("must not contain control characters such as newlines or tabs")


def _prefix_problem(prefix: str, example: str = "") -> str | None:
    """Why prefix is not a usable key prefix (model folder) inside a bucket, or None; example: an adapter's."""
    expected = (f"expected a key prefix inside storage.bucket such as {example}" if example else
                "expected a key prefix inside storage.bucket such as llama-3.1-8b-instruct, "
                "or an absolute path on the host such as /models/llama")
    if "://" in prefix or not prefix:
        return expected
    if any(part in ("", ".", "..") for part in prefix.split("/")):
        return f"{expected}: no empty, '.' or '..' folder names"
    if len(prefix.encode()) > 900:  # S3 keys are at most 1024 bytes: leave room for the file names
        return "the prefix is longer than 900 bytes"
    return None
