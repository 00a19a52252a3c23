"""VRAM and KV-cache fit for one engine instance (pure): weights, activations, KV capacity, a verdict.

Every constant below is written down with where it comes from in docs/sizing.md.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from infra.sizing.catalog import GIB, MIB, GpuSpec, ModelArch

# The CUDA driver keeps part of the memory nvidia-smi reports: torch/vLLM see the rest as "total".
# H100: 81559 MiB (nvidia-smi) vs 79.19-79.22 GiB total in vLLM logs (~440 MiB); H200: 143771 vs
# 143157 MiB from torch (tests/fixtures/gpu-host/h200/torch_props.txt, 614 MiB). 512 MiB sits between.
CUDA_RESERVED_BYTES = 512 * MIB
# Peak activation of vLLM's profiling forward pass, per batched token per unit of hidden size.
# vLLM PR #10511 log: Llama-3-8B (hidden 4096), 8192 batched tokens -> 1.26 GiB => ~40 bytes.
ACTIVATION_BYTES_PER_TOKEN_HIDDEN = 40
# Memory outside torch's allocator and the profiled pass: CUDA context, cuBLAS workspaces, CUDA graphs.
# Fitted so that activation + overhead matches the two published single-GPU breakdowns (docs/sizing.md).
RUNTIME_OVERHEAD_BYTES = int(1.5 * GIB)
# Extra non-torch memory with tensor parallelism (NCCL + custom all-reduce buffers):
# PR #10511, Llama-3-8B, non_torch_memory 1.79 GiB at TP=1 vs 3.58 GiB at TP=2.
TP_COMM_BYTES = int(1.8 * GIB)
# vLLM's default KV block size in tokens (`--block-size`).
DEFAULT_BLOCK_SIZE = 16

# Bytes per parameter of a checkpoint dtype, and of the linear layers under each quantization.
DTYPE_BYTES = {"bfloat16": 2.0, "float16": 2.0, "float32": 4.0, "fp8": 1.0}
# 4-bit formats carry scales: AWQ/GPTQ one fp16 scale (+ zero) per group of 128 (~0.53 B/param);
# NVFP4 one fp8 scale per 16 values (0.5625); MXFP4 one 8-bit scale per 32 (0.53). 8-bit formats: 1.
QUANT_BYTES = {
    "fp8": 1.0, "modelopt": 1.0, "compressed-tensors": 1.0, "int8_sq": 1.0,
    "awq": 0.53, "awq_marlin": 0.53, "gptq": 0.53, "gptq_marlin": 0.53, "int4_awq": 0.53, "w4a8_awq": 0.53,
    "bitsandbytes": 0.56, "gguf": 0.6, "modelopt_fp4": 0.5625, "nvfp4": 0.5625, "mxfp4": 0.53,
}

# How the engine's memory fraction sizes its KV pool: a share of the whole GPU (KV gets what weights,
# activations and overhead leave of it), or a share of what is still free after loading.
KvShare = Literal["total", "free"]


@dataclass(frozen=True)
class SizingInput:
    """What decides the fit of one engine instance (TP x PP GPUs)."""

    arch: ModelArch
    gpu: GpuSpec
    weights_bytes: int
    max_model_len: int
    tp: int = 1
    pp: int = 1
    kv_dtype_bytes: int = 2
    engine: str = ""  # the engine's kind, for messages
    kv_share_of: KvShare = "total"
    memory_fraction: float = 0.9
    batched_tokens: int = 8192
    block_size: int = DEFAULT_BLOCK_SIZE
    fp8_compute: bool = False  # the engine needs FP8 tensor cores (TensorRT-LLM fp8)
    adapter_bytes: int = 0  # per GPU: the LoRA adapter slots (infra/sizing/lora.py)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Budget:
    """Per-GPU memory, in bytes: what the engine may use and what is left for the KV cache."""

    total: int
    usable: int
    weights: int
    activations: int
    overhead: int
    kv: int
    adapters: int = 0  # the LoRA adapter slots, allocated before the KV cache


@dataclass(frozen=True)
class Verdict:
    """Whether the deployment fits, why, and the figures behind it."""

    fits: bool
    reason: str
    budget: Budget
    kv_bytes_per_token: int
    kv_bytes_per_token_per_gpu: int
    kv_capacity_tokens: int
    max_concurrency: float
    headroom_bytes: int
    field: str = ""  # the stack field the refusal is about, e.g. engine.max_model_len
    notes: tuple[str, ...] = ()


def kv_bytes_per_token(arch: ModelArch, dtype_bytes: int, tp: int = 1, pp: int = 1) -> int:
    """KV bytes one token occupies on one GPU (the whole model's figure when tp = pp = 1)."""
    layers = -(-arch.num_layers // pp)  # the largest pipeline stage holds ceil(layers / pp)
    if arch.is_mla:
        # MLA caches one latent (kv_lora_rank + rope dims) per layer, no K/V pair; vLLM replicates it
        # on every tensor-parallel rank rather than splitting heads.
        return layers * (arch.kv_lora_rank + (arch.qk_rope_head_dim or 0)) * dtype_bytes
    heads = max(1, arch.num_kv_heads // tp)  # fewer KV heads than ranks: each rank keeps a replica
    return 2 * layers * heads * arch.head_dim * dtype_bytes


def weight_bytes(arch: ModelArch, quantization: str | None, dtype: str = "auto") -> int:
    """Bytes of the weights on the GPUs: parameters x bytes per parameter for the dtype or quantization."""
    embed = arch.vocab_size * arch.hidden_size * (1 if arch.tie_word_embeddings else 2)
    if quantization is None:
        per_param = DTYPE_BYTES.get(arch.weights_dtype if dtype == "auto" else dtype, 2.0)
        return int(arch.num_params * per_param)
    # Quantization covers the linear layers; embeddings and lm_head stay 16-bit (vLLM, TRT-LLM).
    per_param = QUANT_BYTES.get(quantization, 1.0)
    return int((arch.num_params - embed) * per_param + embed * 2)


def activation_bytes(batched_tokens: int, hidden_size: int) -> int:
    """Estimated peak activation memory of the profiling pass."""
    return batched_tokens * hidden_size * ACTIVATION_BYTES_PER_TOKEN_HIDDEN


def gpu_total_bytes(gpu: GpuSpec) -> int:
    """Memory the CUDA runtime reports as total (what utilization fractions apply to)."""
    return gpu.memory_bytes - CUDA_RESERVED_BYTES


def budget(inp: SizingInput) -> Budget:
    """The per-GPU memory budget: what is left for KV after weights, activations and overhead."""
    total = gpu_total_bytes(inp.gpu)
    weights = -(-inp.weights_bytes // (inp.tp * inp.pp))
    act = activation_bytes(inp.batched_tokens, inp.arch.hidden_size)
    overhead = RUNTIME_OVERHEAD_BYTES + (TP_COMM_BYTES if inp.tp > 1 else 0)
    taken = weights + act + overhead + inp.adapter_bytes
    if inp.kv_share_of == "total":
        # e.g. vLLM: total x gpu_memory_utilization is the whole budget; KV gets what the rest leaves.
        usable = int(total * inp.memory_fraction)
        kv = usable - taken
    else:
        # e.g. TensorRT-LLM: kv_cache_free_gpu_memory_fraction of the memory still free after loading.
        usable = total
        kv = int((total - taken) * inp.memory_fraction)
    return Budget(total, usable, weights, act, overhead, kv, inp.adapter_bytes)


def kv_capacity_tokens(kv_budget: int, per_token: int, block_size: int) -> int:
    """Tokens the KV cache holds: whole blocks of block_size tokens."""
    if kv_budget <= 0 or per_token <= 0:
        return 0
    return (kv_budget // (per_token * block_size)) * block_size


def size(inp: SizingInput) -> Verdict:
    """The fit verdict for one engine instance."""
    b = budget(inp)
    total_pt = kv_bytes_per_token(inp.arch, inp.kv_dtype_bytes)
    per_gpu = kv_bytes_per_token(inp.arch, inp.kv_dtype_bytes, inp.tp, inp.pp)
    tokens = kv_capacity_tokens(b.kv, per_gpu, inp.block_size)
    need = inp.max_model_len * per_gpu
    figures = dict(budget=b, kv_bytes_per_token=total_pt, kv_bytes_per_token_per_gpu=per_gpu,
                   kv_capacity_tokens=tokens, max_concurrency=round(tokens / inp.max_model_len, 2),
                   headroom_bytes=b.kv - need, notes=inp.notes)
    where, why = _refusal(inp, b, tokens)
    return Verdict(fits=not why, reason=why or _ok(inp, tokens), field=where, **figures)


def _refusal(inp: SizingInput, b: Budget, tokens: int) -> tuple[str, str]:
    """(stack field to change, why the engine would refuse to start), or ('', '') when it starts."""
    a = inp.arch
    if inp.max_model_len > a.max_context:
        return "engine.max_model_len", (
            f"max_model_len {inp.max_model_len:,} exceeds {a.key}'s maximum context {a.max_context:,}")
    if a.num_attention_heads % inp.tp:
        return "engine.tensor_parallel_size", (
            f"tensor_parallel_size {inp.tp} does not divide {a.key}'s {a.num_attention_heads} attention heads")
    if inp.fp8_compute and not inp.gpu.fp8:
        return "provider.gpu", f"{inp.gpu.key} has no FP8 support, which TensorRT-LLM's fp8 quantization needs"
    if b.kv <= 0:
        return "provider.gpu", (
            f"weights ({_gib(b.weights)} per GPU) + activations ({_gib(b.activations)}) + runtime "
            f"({_gib(b.overhead)}){_adapters(b)} exceed the {_gib(b.usable)} the engine may use on a {inp.gpu.key}")
    if tokens < inp.max_model_len:
        return "engine.max_model_len", (
            f"the KV cache holds {tokens:,} tokens ({_gib(b.kv)} per GPU) but one request at "
            f"max_model_len needs {inp.max_model_len:,}")
    return "", ""


def _ok(inp: SizingInput, tokens: int) -> str:
    return (f"fits: {tokens:,} KV tokens, {tokens / inp.max_model_len:.1f} concurrent requests at "
            f"{inp.max_model_len:,} tokens")


def _adapters(b: Budget) -> str:
    return f" + adapter slots ({_gib(b.adapters)})" if b.adapters else ""


def _gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"


def with_changes(inp: SizingInput, **changes: object) -> SizingInput:
    """A copy of the input with some fields changed (for trying fixes)."""
    return replace(inp, **changes)  # type: ignore[arg-type]


def max_fitting_context(inp: SizingInput, step: int = 1024) -> int:
    """The largest max_model_len (a multiple of step, at most the model's) that fits, or 0."""
    hi = min(inp.arch.max_context, inp.max_model_len) // step
    lo = 0
    while lo < hi:  # binary search on multiples of step; the fit is monotone in the context length
        mid = (lo + hi + 1) // 2
        if size(replace(inp, max_model_len=mid * step)).fits:
            lo = mid
        else:
            hi = mid - 1
    return lo * step
