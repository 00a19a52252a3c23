"""Engine sections of the stack file: vLLM and TensorRT-LLM options, typed."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# The engine versions inferry maps flags for; their option snapshots live in infra/engines/snapshots/.
VLLM_VERSION = "0.33.0"
TRTLLM_VERSION = "1.2.1"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Speculative(_Strict):
    """Speculative decoding: a method and what that method needs."""

    method: Literal["ngram", "draft_model", "eagle", "eagle3", "mtp"]
    num_speculative_tokens: int = Field(ge=1, le=16)
    model: str | None = Field(default=None, description="draft / EAGLE head weights (s3:// or path or HF id)")
    prompt_lookup_max: int | None = Field(default=None, ge=1, description="ngram: longest n-gram to match")
    prompt_lookup_min: int | None = Field(default=None, ge=1, description="ngram: shortest n-gram to match")

    @model_validator(mode="after")
    def _required_fields(self) -> "Speculative":
        # vLLM docs (features/spec_decode): draft-model and EAGLE methods need the draft weights;
        # ngram needs prompt_lookup_max. MTP uses the target model's own MTP layers.
        if self.method in ("draft_model", "eagle", "eagle3") and not self.model:
            raise ValueError(f"method {self.method!r} needs 'model' (the draft or EAGLE head weights)")
        if self.method == "ngram" and self.prompt_lookup_max is None:
            raise ValueError("method 'ngram' needs 'prompt_lookup_max'")
        if self.method not in ("ngram",) and (self.prompt_lookup_max or self.prompt_lookup_min):
            raise ValueError("prompt_lookup_max/min apply only to method 'ngram'")
        if self.prompt_lookup_min and self.prompt_lookup_max and self.prompt_lookup_min > self.prompt_lookup_max:
            raise ValueError("prompt_lookup_min must not exceed prompt_lookup_max")
        return self


class EngineBase(_Strict):
    """Options both engines share."""

    image: str | None = Field(default=None, description="container image; default: the pinned release's image")
    max_model_len: int | None = Field(default=None, ge=16, description="context length; default: the model's maximum")
    tensor_parallel_size: int = Field(default=1, ge=1, le=64)
    pipeline_parallel_size: int = Field(default=1, ge=1, le=64)
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"] = "auto"
    speculative: Speculative | None = None

    @property
    def gpus(self) -> int:
        """GPUs one engine instance uses."""
        return self.tensor_parallel_size * self.pipeline_parallel_size


class VllmEngine(EngineBase):
    """vLLM (`vllm serve`) options for the pinned release."""

    kind: Literal["vllm"]
    version: Literal["0.33.0"] = VLLM_VERSION
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    quantization: Literal[
        "fp8", "awq", "awq_marlin", "gptq", "gptq_marlin", "compressed-tensors", "modelopt",
        "modelopt_fp4", "mxfp4",
    ] | None = None
    enable_prefix_caching: bool | None = None
    block_size: Literal[8, 16, 32, 64, 128] | None = None
    max_num_seqs: int | None = Field(default=None, ge=1)
    max_num_batched_tokens: int | None = Field(default=None, ge=1)
    enable_chunked_prefill: bool | None = None
    load_format: Literal["auto", "safetensors", "runai_streamer"] = Field(
        default="auto", description="runai_streamer streams weights from the store; others read the host cache")
    dtype: Literal["auto", "bfloat16", "float16"] = "auto"
    extra_args: list[str] = Field(default_factory=list, description="more `vllm serve` flags, checked too")


class TrtllmBuild(_Strict):
    """The TensorRT engine-build workflow (1.2 line only): quantize, trtllm-build, serve the engine."""

    qformat: Literal["fp8", "int4_awq", "w4a8_awq", "int8_sq", "full_prec"] = "fp8"
    calib_size: int = Field(default=512, ge=1)
    calib_dataset: str = "cnn_dailymail"
    gemm_plugin: Literal["auto", "float16", "bfloat16", "fp8", "disable"] = "auto"
    max_input_len: int | None = Field(default=None, ge=1)
    use_paged_context_fmha: bool = True


class TrtllmEngine(EngineBase):
    """TensorRT-LLM (`trtllm-serve`) options; PyTorch backend unless `backend: tensorrt`."""

    kind: Literal["tensorrt-llm"]
    version: str = Field(default=TRTLLM_VERSION, pattern=r"^\d+\.\d+\.\d+([a-z0-9.]*)?$")
    backend: Literal["pytorch", "tensorrt"] = "pytorch"
    max_batch_size: int | None = Field(default=None, ge=1)
    max_num_tokens: int | None = Field(default=None, ge=1)
    kv_cache_free_gpu_memory_fraction: float = Field(default=0.9, gt=0, le=1)
    enable_block_reuse: bool | None = None
    enable_chunked_prefill: bool | None = None
    quantization: Literal["fp8", "nvfp4", "int4_awq", "w4a8_awq"] | None = None
    build: TrtllmBuild | None = None
    extra_options: dict[str, Any] = Field(default_factory=dict, description="more --config YAML keys, checked too")

    @model_validator(mode="after")
    def _build_needs_tensorrt(self) -> "TrtllmEngine":
        if self.build is not None and self.backend != "tensorrt":
            raise ValueError("'build' applies only to backend 'tensorrt'")
        return self


EngineConfig = VllmEngine | TrtllmEngine
