"""The smallest stack-file changes that make a deployment fit, cheapest first."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from infra import catalog
from infra.config import Deployment, VllmEngine
from infra.errors import InferryError
from infra.modelinfo import ModelInfo
from infra.plan import Fix, evaluate
from infra.sizing import max_fitting_context

TP_CHOICES = (2, 4, 8)


def _with(d: Deployment, section: str, **changes: Any) -> Deployment:
    part = getattr(d, section).model_copy(update=changes)
    return d.model_copy(update={section: part})


def _candidates(d: Deployment, info: ModelInfo) -> Iterator[tuple[str, Any, str, Deployment]]:
    """(field, value, why, changed deployment) in the order a user would try them: free first, then GPUs."""
    e, gpu = d.engine, catalog.gpu(d.provider.gpu)
    if e.kv_cache_dtype == "auto" and gpu.fp8:
        yield "engine.kv_cache_dtype", "fp8", "halves the KV cache per token", _with(d, "engine", kv_cache_dtype="fp8")
    if e.quantization is None and (gpu.fp8 or isinstance(e, VllmEngine)):
        yield "engine.quantization", "fp8", "halves the weights", _with(d, "engine", quantization="fp8")
    inp, _, _ = evaluate(d, info)
    ctx = max_fitting_context(inp)
    if 0 < ctx < inp.max_model_len:
        yield ("engine.max_model_len", ctx, f"the longest context that fits, down from {inp.max_model_len:,}",
               _with(d, "engine", max_model_len=ctx))
    for tp in (t for t in TP_CHOICES if t > e.tensor_parallel_size):
        more = _with(_with(d, "engine", tensor_parallel_size=tp), "provider",
                     gpu_count=max(d.provider.gpu_count, tp * e.pipeline_parallel_size))
        yield "engine.tensor_parallel_size", tp, f"{tp} GPUs per replica: provider.gpu_count >= {tp}", more
    for other in sorted(catalog.gpus().values(), key=lambda g: g.memory_mib):
        if other.memory_mib > gpu.memory_mib:
            yield "provider.gpu", other.key, f"{other.memory_mib:,} MiB per GPU, same count", _with(d, "provider", gpu=other.key)


def find_fixes(d: Deployment, info: ModelInfo, limit: int = 3) -> list[Fix]:
    """Up to `limit` single changes that fit, the smallest first; at most one per field."""
    found: list[Fix] = []
    for field, value, why, changed in _candidates(d, info):
        if any(f.field == field for f in found):
            continue
        try:
            _, verdict, _ = evaluate(changed, info)
        except InferryError:
            continue
        if verdict.fits:
            found.append(Fix(field, value, why, verdict))
        if len(found) >= limit:
            break
    return found
