"""vLLM's sizing model: its scheduler defaults, and gpu_memory_utilization as a share of the whole GPU."""
from __future__ import annotations

from typing import TYPE_CHECKING

from infra.engines.contract import SizingModel

if TYPE_CHECKING:
    from infra.sizing.catalog import GpuSpec
    from infra.stack.config import Deployment

# vLLM's default max_num_batched_tokens for `vllm serve` (vllm/engine/arg_utils.py, V1 defaults):
# 8192 on GPUs with at least 70 GiB that are not A100s, 2048 elsewhere.
BIG_GPU_BATCHED_TOKENS, SMALL_GPU_BATCHED_TOKENS = 8192, 2048
# Its default max_num_seqs, same file and rule (_set_default_args / get_batch_defaults, OPENAI_API_SERVER
# context): 1024 on those large GPUs, 256 elsewhere, never above max_num_batched_tokens.
BIG_GPU_MAX_SEQS, SMALL_GPU_MAX_SEQS = 1024, 256
DEFAULT_BLOCK_SIZE = 16


def _big(gpu: GpuSpec) -> bool:
    """vLLM's larger defaults: at least 70 GiB and not an A100 (the Ampere GPUs of the catalog)."""
    return gpu.memory_mib >= 70 * 1024 and gpu.architecture != "ampere"


def batched_tokens(d: Deployment, gpu: GpuSpec) -> int:
    """max_num_batched_tokens: the stack's, else vLLM's default for the GPU."""
    return d.engine.max_num_batched_tokens or (BIG_GPU_BATCHED_TOKENS if _big(gpu) else SMALL_GPU_BATCHED_TOKENS)


def max_seqs(d: Deployment, gpu: GpuSpec) -> int:
    """max_num_seqs: the stack's, else vLLM's default for the GPU (never above the batched tokens)."""
    default = min(BIG_GPU_MAX_SEQS if _big(gpu) else SMALL_GPU_MAX_SEQS, batched_tokens(d, gpu))
    return d.engine.max_num_seqs or default


def dtype(d: Deployment) -> str:
    """engine.dtype when set, else the model's."""
    return d.engine.dtype if d.engine.dtype != "auto" else d.model.dtype


SIZING = SizingModel(
    kv_share_of="total", memory_fraction=lambda e: e.gpu_memory_utilization, batched_tokens=batched_tokens,
    max_seqs=max_seqs, block_size=lambda e: e.block_size or DEFAULT_BLOCK_SIZE,
    quantization=lambda e: e.quantization, dtype=dtype, fp8_weight_only=True,
)
