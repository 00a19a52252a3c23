"""TensorRT-LLM's --config YAML: the stack's typed fields and engine.extra_options merged deeply, and the
conflicts between them refused at validate.

trtllm-serve 1.2 lays the YAML over what its own flags built, one top-level key at a time
(tensorrt_llm/llmapi/llm_args.py, update_llm_args_with_extra_dict: `llm_args | llm_args_dict`): a YAML
`kv_cache_config` replaces the KvCacheConfig that --kv_cache_free_gpu_memory_fraction made, so inferry writes
that fraction into the YAML block whenever there is one.
"""
from __future__ import annotations

from typing import Any

from infra.stack.config import Deployment, TrtllmEngine
from infra.errors import Problem

# TrtLlmArgs.validate_kv_cache_dtype (tensorrt_llm/llmapi/llm_args.py, 1.2 line).
TRT_KV_DTYPE_RULE = ("TensorRT-LLM 1.2 TrtLlmArgs.validate_kv_cache_dtype (tensorrt_llm/llmapi/llm_args.py): "
                     "\"KvCacheConfig.dtype is not supported by the TensorRT backend.\"")


def typed_keys(d: Deployment) -> dict[tuple[str, ...], tuple[str, Any]]:
    """YAML key path -> (stack field, its value or None when unset): what the stack sets through a trtllm-serve
    flag or the rendered YAML, so extra_options must not set it too."""
    e = d.engine
    assert isinstance(e, TrtllmEngine)
    return {
        ("model",): ("model.weights", d.model.weights),
        ("backend",): ("engine.backend", e.backend),
        ("tensor_parallel_size",): ("engine.tensor_parallel_size", e.tensor_parallel_size),
        ("pipeline_parallel_size",): ("engine.pipeline_parallel_size", e.pipeline_parallel_size),
        ("max_batch_size",): ("engine.max_batch_size", e.max_batch_size),
        ("max_num_tokens",): ("engine.max_num_tokens", e.max_num_tokens),
        ("max_seq_len",): ("engine.max_model_len", e.max_model_len),
        ("kv_cache_config", "free_gpu_memory_fraction"): ("engine.kv_cache_free_gpu_memory_fraction",
                                                          e.kv_cache_free_gpu_memory_fraction),
        ("kv_cache_config", "enable_block_reuse"): ("engine.enable_block_reuse", e.enable_block_reuse),
        ("kv_cache_config", "dtype"): ("engine.kv_cache_dtype", None if e.kv_cache_dtype == "auto" else e.kv_cache_dtype),
        ("enable_chunked_prefill",): ("engine.enable_chunked_prefill", e.enable_chunked_prefill),
        ("speculative_config",): ("engine.speculative", e.speculative),
    }


def _has(tree: Any, path: tuple[str, ...]) -> bool:
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return False
        tree = tree[key]
    return True


def deep_merge(base: dict, extra: dict) -> dict:
    """base with extra laid over it key by key, nested mappings merged (neither input changed)."""
    out = dict(base)
    for k, v in extra.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def conflict_problems(d: Deployment) -> list[Problem]:
    """Keys of extra_options that a typed field already sets: one problem naming both."""
    e = d.engine
    assert isinstance(e, TrtllmEngine)
    problems = []
    for path, (field, value) in typed_keys(d).items():
        if value is not None and _has(e.extra_options, path):
            key = ".".join(path)
            problems.append(Problem("engine.extra_options", f"{key} is set both by engine.extra_options.{key} "
                                    f"and by {field}", hint=f"remove {key} from engine.extra_options and keep {field}"))
    return problems


def tensorrt_backend_problems(e: TrtllmEngine, merged: dict) -> list[Problem]:
    """What TrtLlmArgs refuses in the YAML: a KV cache dtype (the engine build fixes it instead)."""
    dtype = (merged.get("kv_cache_config") or {}).get("dtype", "auto")
    if e.backend != "tensorrt" or dtype in ("auto", None):
        return []
    return [Problem("engine.extra_options", f"kv_cache_config.dtype {dtype!r} is refused by the TensorRT backend "
                    f"({TRT_KV_DTYPE_RULE})", hint="remove it and set engine.kv_cache_dtype: fp8, which the "
                    "engine build bakes in (quantize.py --kv_cache_dtype fp8)")]
