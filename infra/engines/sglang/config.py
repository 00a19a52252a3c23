"""SGLang's `engine:` section: typed fields for what inferry sizes and owns, the rest in checked extra_args."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from infra.stack.config_engines import EngineBase, checkable_args
from infra.stack.config_targets import INT32_MAX

VERSION = "0.5.23"  # the pinned release; its snapshot: infra/engines/snapshots/sglang-0.5.23.json


class SglangEngine(EngineBase):
    """SGLang (`python3 -m sglang.launch_server`) options for the pinned release.

    Shared names as the other engines have them (max_model_len -> --context-length, tensor_parallel_size ->
    --tp-size, pipeline_parallel_size -> --pp-size), so validate's generic rules and sizing name one field."""

    kind: Literal["sglang"]
    version: Literal["0.5.23"] = VERSION
    data_parallel_size: int = Field(default=1, ge=1, le=64, description="--dp-size: engine-internal replicas")
    mem_fraction_static: float | None = Field(
        default=None, gt=0, lt=1, description="weights + KV pool as a share of GPU memory (default: SGLang's "
        "estimate from the GPU's memory)")
    quantization: Literal["fp8", "awq", "awq_marlin", "gptq", "gptq_marlin", "compressed-tensors", "modelopt",
                          "modelopt_fp4", "mxfp4", "w8a8_fp8", "w8a8_int8"] | None = None
    chunked_prefill_size: int | None = Field(default=None, ge=-1, le=INT32_MAX,
                                             description="tokens per prefill chunk; -1 turns chunking off")
    max_running_requests: int | None = Field(default=None, ge=1, le=INT32_MAX)
    dtype: Literal["auto", "bfloat16", "float16"] = "auto"
    extra_args: list[str] = Field(default_factory=list, description="more launch_server flags, checked too")

    @property
    def gpus(self) -> int:
        """GPUs one engine instance uses: tensor x pipeline x data parallel (compute_world_size)."""
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size

    @field_validator("extra_args")
    @classmethod
    def _checkable_args(cls, v: list[str]) -> list[str]:
        return checkable_args(v)
