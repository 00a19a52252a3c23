"""A deployment's plan: will it fit on its GPUs, and what a million output tokens costs."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from infra.sizing import catalog
from infra.stack.config import Deployment
from infra.engines.registry import engine_for
from infra.sizing.cost import Throughput, choose_throughput, cpm, decode_estimate, price_note, usd_per_hour
from infra.sizing.modelinfo import ModelInfo, Reader, resolve, weights_on_gpus
from infra.sizing.lora import adapter_bytes
from infra.sizing.memory import DTYPE_BYTES, SizingInput, Verdict, size

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
    lora: str = ""  # the adapter slots as the engine starts with them, e.g. "2 slot(s) at rank 16"; "" none


def replicas(d: Deployment) -> int:
    """Engine instances the stack runs (SSH hosts, or Kubernetes replicas; the autoscaler's minimum)."""
    return d.target.instances


def max_seqs(d: Deployment, gpu: catalog.GpuSpec) -> int:
    """Sequences the engine schedules at once: the stack's setting, else the pinned engine's default."""
    return engine_for(d.engine.kind).sizing.max_seqs(d, gpu)


def sizing_input(d: Deployment, info: ModelInfo) -> tuple[SizingInput, str]:
    """(the sizing input of one engine instance, where the weight figure came from)."""
    e, gpu = d.engine, catalog.resolve_gpu(d.provider.gpu)
    engine = engine_for(e.kind)
    m = engine.sizing
    quant = m.quantization(e)
    quant = None if quant == "full_prec" else quant
    weights, source = weights_on_gpus(info, quant, m.dtype(d))
    notes: tuple[str, ...] = ()
    if m.fp8_weight_only and quant == "fp8" and not gpu.fp8:
        notes += (f"{gpu.key} has no FP8 tensor cores: {engine.label} runs fp8 weight-only (Marlin), slower",)
    if d.provider.gpu_count > e.gpus:
        notes += (f"provider.gpu_count {d.provider.gpu_count} but the engine uses {e.gpus}: "
                  "the rest are paid for and idle",)
    notes += tuple(filter(None, [price_note(d.provider.price_per_gpu_hour)]))
    fp8_kv = e.kv_cache_dtype.startswith("fp8")
    adapters = adapter_slot_bytes(d, info, m.dtype(d))
    inp = SizingInput(
        arch=info.arch, gpu=gpu, weights_bytes=weights,
        max_model_len=e.max_model_len or info.arch.max_context, tp=e.tensor_parallel_size,
        pp=e.pipeline_parallel_size, kv_dtype_bytes=1 if fp8_kv else 2,
        engine=e.kind, kv_share_of=m.kv_share_of, memory_fraction=m.memory_fraction(e),
        batched_tokens=m.batched_tokens(d, gpu), block_size=m.block_size(e),
        fp8_compute=not m.fp8_weight_only and (quant == "fp8" or fp8_kv), adapter_bytes=adapters, notes=notes)
    return inp, source


def lora_rank(d: Deployment) -> int:
    """The rank limit the engine is started with for the stack's adapters (0 without any)."""
    from infra.engines.lora import rank_limit

    support = engine_for(d.engine.kind).lora
    if not d.model.adapters or support is None:
        return 0
    return rank_limit(d, support.ranks(d.engine.version))


def adapter_slot_bytes(d: Deployment, info: ModelInfo, dtype: str) -> int:
    """Per-GPU bytes of the stack's LoRA adapter slots (infra/sizing/lora.py); 0 without adapters."""
    rank = lora_rank(d)
    if not rank:
        return 0
    per = DTYPE_BYTES.get(info.arch.weights_dtype if dtype == "auto" else dtype, 2.0)
    e = d.engine
    return adapter_bytes(info.arch, d.model.slots, rank, per, e.tensor_parallel_size, e.pipeline_parallel_size)


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
                residency=d.policy.residency,
                lora=f"{d.model.slots} slot(s) at rank {lora_rank(d)}" if lora_rank(d) else "")
