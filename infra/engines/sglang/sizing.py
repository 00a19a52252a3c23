"""SGLang's sizing model: mem_fraction_static holds weights and the KV pool, a share of all GPU memory."""
from __future__ import annotations

from typing import TYPE_CHECKING

from infra.engines.contract import SizingModel

if TYPE_CHECKING:
    from infra.sizing.catalog import GpuSpec
    from infra.stack.config import Deployment

MIB = 2**20


def _gpu_mib(gpu: GpuSpec) -> int:
    return gpu.memory_mib


def chunked_prefill(d: Deployment, gpu: GpuSpec) -> int:
    """chunked_prefill_size: the stack's, else SGLang's default for the GPU's memory
    (arg_groups/memory_hook.py _handle_gpu_memory_settings: 2k under 20 GiB, 4k under 60, 8k under 160, else 16k)."""
    size = d.engine.chunked_prefill_size
    if size is not None and size > 0:
        return size
    mib = _gpu_mib(gpu)
    return 2048 if mib < 20 * 1024 else 4096 if mib < 60 * 1024 else 8192 if mib < 160 * 1024 else 16384


def max_seqs(d: Deployment, gpu: GpuSpec) -> int:
    """max_running_requests: the stack's, else the decode CUDA-graph batch SGLang sizes for the GPU (same hook)."""
    if d.engine.max_running_requests:
        return d.engine.max_running_requests
    mib, tp = _gpu_mib(gpu), d.engine.tensor_parallel_size
    if mib < 20 * 1024:
        return 8
    if mib < 60 * 1024:
        return 48 if mib < 35 * 1024 and tp < 4 else 32 if tp < 4 else 160
    return 256 if tp < 4 and mib < 160 * 1024 else 512


def memory_fraction(e) -> float:
    """mem_fraction_static, else 0.88: SGLang's estimate (memory_hook.py:324, (GPU - reserve) / GPU with a
    10 GiB reserve floor above 60 GiB) lands between 0.85 and 0.9 on the catalog's data-centre GPUs."""
    return e.mem_fraction_static if e.mem_fraction_static is not None else 0.88


def dtype(d: Deployment) -> str:
    """engine.dtype when set, else the model's."""
    return d.engine.dtype if d.engine.dtype != "auto" else d.model.dtype


# kv_share_of "total": the KV pool is mem_fraction_static x GPU memory minus the weights. SGLang keeps
# activations outside that fraction; sizing subtracts them inside it too, which only errs on the safe side.
SIZING = SizingModel(
    kv_share_of="total", memory_fraction=memory_fraction, batched_tokens=chunked_prefill, max_seqs=max_seqs,
    block_size=lambda e: 1,  # page_size 1: SGLang's token-granular KV pool by default
    quantization=lambda e: e.quantization, dtype=dtype, fp8_weight_only=False,
)
