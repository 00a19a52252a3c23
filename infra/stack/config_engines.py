"""Engine sections of the stack file, typed: the options every engine shares, vLLM's and TensorRT-LLM's sections."""
from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from infra.stack.config_targets import INT32_MAX, STRICT
from infra.stack.problems import short

# The engine versions inferry maps flags for; their option snapshots live in infra/engines/snapshots/.
VLLM_VERSION = "0.33.0"
TRTLLM_VERSION = "1.2.1"
# What extra_args and extra_options may hold. inferry checks them with Python's argparse, int, float and json
# (as the engines parse them): a number past these digits overflows a float, JSON nested past this depth
# exhausts the stack. No real option comes near either.
MAX_ARG_LEN = 4096
MAX_DIGITS = 30
MAX_NESTING = 32
# extra_options keys whose values TensorRT-LLM reads as mappings (and inferry checks key by key).
MAPPING_OPTIONS = ("kv_cache_config", "speculative_config")


def arg_problem(arg: str) -> str | None:
    """Why one extra command-line argument is refused, or None."""
    if len(arg) > MAX_ARG_LEN:
        return f"longer than {MAX_ARG_LEN} characters"
    if "\x00" in arg:
        return "holds a NUL character, which no command line can carry (the shell would drop it silently)"
    if re.search(r"\d{%d}" % (MAX_DIGITS + 1), arg):
        return f"holds a number of more than {MAX_DIGITS} digits"
    depth = deepest = 0
    for c in arg:
        depth += (c in "[{") - (c in "]}")
        deepest = max(deepest, depth)
    return f"nests brackets deeper than {MAX_NESTING} levels" if deepest > MAX_NESTING else None


def checkable_args(args: list[str]) -> list[str]:
    """extra_args as given, or ValueError naming the first one no engine parser could take as one token."""
    for i, arg in enumerate(args):
        if problem := arg_problem(arg):
            raise ValueError(f"argument {i + 1} ({short(arg)}) {problem}")
    return args


def option_problem(value: Any, depth: int = 0) -> str | None:
    """Why a value cannot go into TensorRT-LLM's --config YAML as it is, or None."""
    if depth > MAX_NESTING:
        return f"nested deeper than {MAX_NESTING} levels"
    if isinstance(value, dict):
        bad = [k for k in value if not isinstance(k, str)]
        if bad:
            return f"key {short(bad[0])} is not a string"
        return next((f"{k}: {p}" for k, v in value.items() if (p := option_problem(v, depth + 1))), None)
    if isinstance(value, list):
        return next((f"[{i}]: {p}" for i, v in enumerate(value) if (p := option_problem(v, depth + 1))), None)
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN and infinities are not allowed"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**63:
        return "an integer past 64 bits"
    if value is not None and not isinstance(value, (str, int, float)):
        return f"a {type(value).__name__} is not a YAML value"
    return None


class _Strict(BaseModel):
    """Base for engine sections: unknown keys are errors, values are not coerced (see STRICT)."""

    model_config = STRICT


class Speculative(_Strict):
    """Speculative decoding: a method and what that method needs."""

    method: Literal["ngram", "draft_model", "eagle", "eagle3", "mtp"]
    num_speculative_tokens: int = Field(ge=1, le=16)
    model: str | None = Field(default=None, description="draft / EAGLE head weights (s3:// or path or HF id)")
    prompt_lookup_max: int | None = Field(default=None, ge=1, le=INT32_MAX,
                                          description="ngram: longest n-gram to match")
    prompt_lookup_min: int | None = Field(default=None, ge=1, le=INT32_MAX,
                                          description="ngram: shortest n-gram to match")

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
    """Options every engine shares."""

    # An image reference has no spaces or control characters (Docker's reference grammar); a line break would
    # also break the compose file's one-line value.
    image: str | None = Field(default=None, pattern=r"^[^\s\x00-\x1f\x7f]{1,512}$",
                              description="a container image reference without spaces or control characters "
                              "(default: the pinned release's image)")
    max_model_len: int | None = Field(default=None, ge=16, le=INT32_MAX,
                                      description="context length; default: the model's maximum")
    tensor_parallel_size: int = Field(default=1, ge=1, le=64)
    pipeline_parallel_size: int = Field(default=1, ge=1, le=64)
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"] = "auto"
    speculative: Speculative | None = None

    @property
    def gpus(self) -> int:
        """GPUs one engine instance uses."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def streams_weights(self) -> bool:
        """The engine reads the weights from the store itself (the target fetches nothing)."""
        return False


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
    max_num_seqs: int | None = Field(default=None, ge=1, le=INT32_MAX)
    max_num_batched_tokens: int | None = Field(default=None, ge=1, le=INT32_MAX)
    enable_chunked_prefill: bool | None = None
    load_format: Literal["auto", "safetensors", "runai_streamer"] = Field(
        default="auto", description="runai_streamer streams weights from the store; others read the host cache")
    dtype: Literal["auto", "bfloat16", "float16"] = "auto"
    extra_args: list[str] = Field(default_factory=list, description="more `vllm serve` flags, checked too")

    @property
    def streams_weights(self) -> bool:
        """The Run:ai Model Streamer reads the weights from the store."""
        return self.load_format == "runai_streamer"

    @field_validator("extra_args")
    @classmethod
    def _checkable_args(cls, v: list[str]) -> list[str]:
        return checkable_args(v)


class TrtllmBuild(_Strict):
    """The TensorRT engine-build workflow (1.2 line only): quantize, trtllm-build, serve the engine."""

    qformat: Literal["fp8", "int4_awq", "w4a8_awq", "int8_sq", "full_prec"] = "fp8"
    calib_size: int = Field(default=512, ge=1, le=INT32_MAX)
    calib_dataset: str = "cnn_dailymail"
    gemm_plugin: Literal["auto", "float16", "bfloat16", "fp8", "disable"] = "auto"
    max_input_len: int | None = Field(default=None, ge=1, le=INT32_MAX)
    use_paged_context_fmha: bool = True


class TrtllmEngine(EngineBase):
    """TensorRT-LLM (`trtllm-serve`) options; PyTorch backend unless `backend: tensorrt`."""

    kind: Literal["tensorrt-llm"]
    version: str = Field(default=TRTLLM_VERSION, pattern=r"^\d{1,4}\.\d{1,4}\.\d{1,6}([a-z0-9.]{0,32})?$",
                         description="a TensorRT-LLM release such as 1.2.1 or 1.3.0rc1")
    backend: Literal["pytorch", "tensorrt"] = "pytorch"
    max_batch_size: int | None = Field(default=None, ge=1, le=INT32_MAX)
    max_num_tokens: int | None = Field(default=None, ge=1, le=INT32_MAX)
    kv_cache_free_gpu_memory_fraction: float = Field(default=0.9, gt=0, le=1)
    enable_block_reuse: bool | None = None
    enable_chunked_prefill: bool | None = None
    quantization: Literal["fp8", "nvfp4", "int4_awq", "w4a8_awq"] | None = None
    build: TrtllmBuild | None = None
    extra_options: dict[str, Any] = Field(default_factory=dict, description="more --config YAML keys, checked too")

    @field_validator("extra_options")
    @classmethod
    def _yaml_options(cls, v: dict[str, Any]) -> dict[str, Any]:
        if problem := option_problem(v):
            raise ValueError(problem)
        bad = next((k for k in MAPPING_OPTIONS if k in v and not isinstance(v[k], dict)), None)
        if bad:
            raise ValueError(f"{bad} must be a mapping of TensorRT-LLM's {bad} keys")
        spec = v.get("speculative_config") or {}
        if not isinstance(spec.get("decoding_type", ""), str):
            raise ValueError("speculative_config.decoding_type must be a string, e.g. Eagle or NGram")
        return v

    @model_validator(mode="after")
    def _build_needs_tensorrt(self) -> "TrtllmEngine":
        if self.build is not None and self.backend != "tensorrt":
            raise ValueError("'build' applies only to backend 'tensorrt'")
        return self

