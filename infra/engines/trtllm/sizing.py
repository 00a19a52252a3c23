"""TensorRT-LLM's sizing model: its build defaults, and the KV fraction as a share of what loading leaves."""
from __future__ import annotations

from typing import TYPE_CHECKING

from infra.engines.contract import SizingModel

if TYPE_CHECKING:
    from infra.sizing.catalog import GpuSpec
    from infra.stack.config import Deployment

# trtllm-serve's --max_batch_size and --max_num_tokens default to BuildConfig's 2048 and 8192.
MAX_BATCH_SIZE = 2048
MAX_NUM_TOKENS = 8192
TOKENS_PER_BLOCK = 32  # kv_cache_config.tokens_per_block default


def batched_tokens(d: Deployment, gpu: GpuSpec) -> int:
    """max_num_tokens: the stack's, else the default."""
    return d.engine.max_num_tokens or MAX_NUM_TOKENS


def max_seqs(d: Deployment, gpu: GpuSpec) -> int:
    """max_batch_size: the stack's, else the default."""
    return d.engine.max_batch_size or MAX_BATCH_SIZE


def quantization(e) -> str | None:
    """The stack's quantization, else the TensorRT engine build's qformat."""
    return e.quantization or (e.build.qformat if e.build else None)


SIZING = SizingModel(
    kv_share_of="free", memory_fraction=lambda e: e.kv_cache_free_gpu_memory_fraction,
    batched_tokens=batched_tokens, max_seqs=max_seqs, block_size=lambda e: TOKENS_PER_BLOCK,
    quantization=quantization, dtype=lambda d: d.model.dtype, fp8_weight_only=False,
)
