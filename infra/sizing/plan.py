"""A deployment's plan: will it fit on its GPUs, and what a million output tokens costs."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from infra.sizing import catalog
from infra.stack.config import Deployment, VllmEngine
from infra.sizing.cost import Throughput, choose_throughput, cpm, decode_estimate, price_note, usd_per_hour
from infra.sizing.modelinfo import ModelInfo, Reader, resolve, weights_on_gpus
from infra.sizing.memory import SizingInput, Verdict, size

# vLLM's default max_num_batched_tokens for `vllm serve` (vllm/engine/arg_utils.py, V1 defaults):
# 8192 on GPUs with at least 70 GiB that are not A100s, 2048 elsewhere. TensorRT-LLM's max_num_tokens: 8192.
BIG_GPU_BATCHED_TOKENS, SMALL_GPU_BATCHED_TOKENS = 8192, 2048
# Its default max_num_seqs, same file and rule (_set_default_args / get_batch_defaults, OPENAI_API_SERVER
# context): 1024 on those large GPUs, 256 elsewhere, never above max_num_batched_tokens.
BIG_GPU_MAX_SEQS, SMALL_GPU_MAX_SEQS = 1024, 256
# TensorRT-LLM: trtllm-serve's --max_batch_size and --max_num_tokens default to BuildConfig's 2048 and 8192.
TRTLLM_MAX_BATCH_SIZE = 2048
TRTLLM_MAX_NUM_TOKENS = 8192
TRTLLM_TOKENS_PER_BLOCK = 32  # kv_cache_config.tokens_per_block default


@dataclass(frozen=True)
class Fix:
    """One change to the stack file that makes the deployment fit."""

    field: str
    value: Any
    why: str
    verdict: Verdict
    changes: dict[str, Any] = field(default_factory=dict)  # every field the fix sets, `field` first


@dataclass(frozen=True)
class Plan:
    """Everything `inferry plan` reports for one deployment."""

    gpu: str
    gpu_count: int
    replicas: int
    model: ModelInfo
    weights_source: str
    sizing: SizingInput
    verdict: Verdict
    throughput: Throughput
    usd_per_hour: float
    cpm_usd: float | None  # None when it does not fit: nothing runs, so nothing is served at a cost
    residency: str | None
    fixes: list[Fix] = field(default_factory=list)


def replicas(d: Deployment) -> int:
    """Engine instances the stack runs (SSH hosts, or Kubernetes replicas; the autoscaler's minimum)."""
    return d.target.instances


def _big(gpu: catalog.GpuSpec) -> bool:
    """vLLM's larger defaults: at least 70 GiB and not an A100 (the Ampere GPUs of the catalog)."""
    return gpu.memory_mib >= 70 * 1024 and gpu.architecture != "ampere"


def _batched_tokens(d: Deployment, gpu: catalog.GpuSpec) -> int:
    e = d.engine
    if isinstance(e, VllmEngine):
        return e.max_num_batched_tokens or (BIG_GPU_BATCHED_TOKENS if _big(gpu) else SMALL_GPU_BATCHED_TOKENS)
    return e.max_num_tokens or TRTLLM_MAX_NUM_TOKENS


def max_seqs(d: Deployment, gpu: catalog.GpuSpec) -> int:
    """Sequences the engine schedules at once: the stack's setting, else the pinned engine's default."""
    e = d.engine
    if isinstance(e, VllmEngine):
        default = min(BIG_GPU_MAX_SEQS if _big(gpu) else SMALL_GPU_MAX_SEQS, _batched_tokens(d, gpu))
        return e.max_num_seqs or default
    return e.max_batch_size or TRTLLM_MAX_BATCH_SIZE


def sizing_input(d: Deployment, info: ModelInfo) -> tuple[SizingInput, str]:
    """(the sizing input of one engine instance, where the weight figure came from)."""
    e, gpu = d.engine, catalog.resolve_gpu(d.provider.gpu)
    vllm = isinstance(e, VllmEngine)
    quant = e.quantization if vllm else (e.quantization or (e.build.qformat if e.build else None))
    quant = None if quant == "full_prec" else quant
    dtype = e.dtype if vllm and e.dtype != "auto" else d.model.dtype
    weights, source = weights_on_gpus(info, quant, dtype)
    notes: tuple[str, ...] = ()
    if vllm and quant == "fp8" and not gpu.fp8:
        notes += (f"{gpu.key} has no FP8 tensor cores: vLLM runs fp8 weight-only (Marlin), slower",)
    if d.provider.gpu_count > e.gpus:
        notes += (f"provider.gpu_count {d.provider.gpu_count} but the engine uses {e.gpus}: "
                  "the rest are paid for and idle",)
    notes += tuple(filter(None, [price_note(d.provider.price_per_gpu_hour)]))
    inp = SizingInput(
        arch=info.arch, gpu=gpu, weights_bytes=weights,
        max_model_len=e.max_model_len or info.arch.max_context, tp=e.tensor_parallel_size,
        pp=e.pipeline_parallel_size, kv_dtype_bytes=1 if e.kv_cache_dtype.startswith("fp8") else 2,
        engine="vllm" if vllm else "tensorrt-llm",
        memory_fraction=e.gpu_memory_utilization if vllm else e.kv_cache_free_gpu_memory_fraction,
        batched_tokens=_batched_tokens(d, gpu),
        block_size=(e.block_size or 16) if vllm else TRTLLM_TOKENS_PER_BLOCK,
        fp8_compute=not vllm and (quant == "fp8" or e.kv_cache_dtype.startswith("fp8")), notes=notes)
    return inp, source


def evaluate(d: Deployment, info: ModelInfo | None = None) -> tuple[SizingInput, Verdict, str]:
    """(input, verdict, weights source) for a deployment."""
    inp, source = sizing_input(d, info or resolve(d))
    return inp, size(inp), source


def make_plan(d: Deployment, measured_tps: float | None = None, read: Reader | None = None) -> Plan:
    """The plan: fit and cost (infra.sizing.fit adds the fixes when it does not fit)."""
    info = resolve(d, read)
    inp, verdict, source = evaluate(d, info)
    estimate, batch = decode_estimate(verdict.budget.weights, verdict.kv_bytes_per_token_per_gpu, inp.gpu,
                                      verdict.kv_capacity_tokens, max_seqs(d, inp.gpu))
    tput = choose_throughput(measured_tps, d.provider.tokens_per_second, estimate, batch)
    n = replicas(d)
    hourly = usd_per_hour(d.provider.price_per_gpu_hour, d.provider.gpu_count, n)
    per_replica = usd_per_hour(d.provider.price_per_gpu_hour, d.provider.gpu_count)
    return Plan(gpu=inp.gpu.key, gpu_count=d.provider.gpu_count, replicas=n, model=info, weights_source=source,
                sizing=inp, verdict=verdict, throughput=tput, usd_per_hour=hourly,
                cpm_usd=cpm(per_replica, tput.tokens_per_second) if verdict.fits else None,
                residency=d.policy.residency)
