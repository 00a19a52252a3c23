"""Cost per million output tokens (pure): hourly price over tokens per hour, and where tokens/s came from."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from infra.sizing.catalog import GpuSpec

# Decode reads every weight byte and each sequence's KV once per step; well-tuned engines reach about
# 70% of peak HBM bandwidth in decode (docs/sizing.md). The estimate assumes sequences 1,024 tokens deep
# on average, as many in flight as the engine schedules (its max_num_seqs / max_batch_size, infra/sizing/plan.py).
BANDWIDTH_EFFICIENCY = 0.7
AVG_CONTEXT_TOKENS = 1024

TpsSource = Literal["measured", "stack", "estimate"]


@dataclass(frozen=True)
class Throughput:
    """Output tokens per second of one replica, and where the figure came from."""

    tokens_per_second: float
    source: TpsSource
    detail: str


def decode_estimate(weights_per_gpu: int, kv_per_token_per_gpu: int, gpu: GpuSpec, kv_capacity_tokens: int,
                    max_seqs: int) -> tuple[float, int]:
    """(output tokens/s, batch) of one replica when decode is bound by memory bandwidth: the batch is what the
    engine schedules (max_seqs) or what the KV cache holds, whichever is less."""
    batch = max(1, min(max_seqs, kv_capacity_tokens // AVG_CONTEXT_TOKENS))
    step_bytes = weights_per_gpu + batch * AVG_CONTEXT_TOKENS * kv_per_token_per_gpu  # per GPU, all in parallel
    step_s = step_bytes / (gpu.bandwidth_bytes_per_s * BANDWIDTH_EFFICIENCY)
    return batch / step_s, batch


def choose_throughput(measured: float | None, stack: float | None, estimate: float, batch: int) -> Throughput:
    """The first known of: a measured figure, the stack's figure, the bandwidth-bound estimate."""
    if measured:
        return Throughput(measured, "measured", "recorded by `inferry bench`")
    if stack:
        return Throughput(stack, "stack", "provider.tokens_per_second")
    return Throughput(estimate, "estimate", f"bandwidth-bound decode, {batch} sequences x {AVG_CONTEXT_TOKENS} tokens")


def usd_per_hour(price_per_gpu_hour: float, gpus_per_replica: int, replicas: int = 1) -> float:
    """What the GPUs cost per hour."""
    return price_per_gpu_hour * gpus_per_replica * replicas


def price_note(price_per_gpu_hour: float) -> str | None:
    """Why a CPM is not a cost: a price of 0 (allowed: owned GPUs still have a cost, which it leaves out)."""
    if price_per_gpu_hour > 0:
        return None
    return ("provider.price_per_gpu_hour 0 makes every cost $0: for owned GPUs, set their hourly cost "
            "(depreciation, power, hosting) to compare")


def cpm(hourly_usd: float, tokens_per_second: float) -> float:
    """USD per million output tokens: hourly cost / (tokens/s x 3600 / 1e6)."""
    if tokens_per_second <= 0:
        raise ValueError("tokens_per_second must be positive")
    return hourly_usd / (tokens_per_second * 3600 / 1e6)
