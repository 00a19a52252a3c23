"""Refuse what does not fit, with the smallest stack-file changes that would make it fit."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from infra import catalog
from infra.config import Deployment, VllmEngine
from infra.errors import InferryError, Problem, SizingError
from infra.modelinfo import ModelInfo, Reader
from infra.plan import Fix, Plan, evaluate, make_plan
from infra.sizing import Verdict, max_fitting_context

TP_CHOICES = (2, 4, 8)


def with_fields(d: Deployment, section: str, **changes: Any) -> Deployment:
    """A copy of the deployment with some fields of one section changed."""
    part = getattr(d, section).model_copy(update=changes)
    return d.model_copy(update={section: part})


def _candidates(d: Deployment, info: ModelInfo) -> Iterator[tuple[str, Any, str, Deployment]]:
    """(field, value, why, changed deployment) in the order a user would try them: free first, then GPUs."""
    e, gpu = d.engine, catalog.gpu(d.provider.gpu)
    if e.kv_cache_dtype == "auto" and gpu.fp8:
        yield ("engine.kv_cache_dtype", "fp8", "halves the KV cache per token",
               with_fields(d, "engine", kv_cache_dtype="fp8"))
    if e.quantization is None and (gpu.fp8 or isinstance(e, VllmEngine)):
        yield "engine.quantization", "fp8", "halves the weights", with_fields(d, "engine", quantization="fp8")
    inp, _, _ = evaluate(d, info)
    ctx = max_fitting_context(inp)
    if 0 < ctx < inp.max_model_len:
        why = ("the model's maximum context" if ctx == info.arch.max_context
               else f"the longest context that fits, down from {inp.max_model_len:,}")
        yield "engine.max_model_len", ctx, why, with_fields(d, "engine", max_model_len=ctx)
    for tp in (t for t in TP_CHOICES if t > e.tensor_parallel_size):
        more = with_fields(with_fields(d, "engine", tensor_parallel_size=tp), "provider",
                           gpu_count=max(d.provider.gpu_count, tp * e.pipeline_parallel_size))
        yield "engine.tensor_parallel_size", tp, f"{tp} GPUs per replica: provider.gpu_count >= {tp}", more
    for other in sorted(catalog.gpus().values(), key=lambda g: g.memory_mib):
        if other.memory_mib > gpu.memory_mib or (other.fp8 and not gpu.fp8):
            yield ("provider.gpu", other.key, f"{other.memory_mib:,} MiB per GPU, same count",
                   with_fields(d, "provider", gpu=other.key))


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


def plan_with_fixes(d: Deployment, measured_tps: float | None = None, read: Reader | None = None) -> Plan:
    """The plan, with the fixes that fit when the deployment itself does not."""
    plan = make_plan(d, measured_tps, read)
    return plan if plan.verdict.fits else replace(plan, fixes=find_fixes(d, plan.model))


def require_fit(d: Deployment) -> Verdict:
    """The verdict when the deployment fits; SizingError with the reason and the smallest fix otherwise."""
    plan = plan_with_fixes(d)
    if plan.verdict.fits:
        return plan.verdict
    raise SizingError(plan.verdict.reason, fix_text(plan), where=f"{plan.model.arch.key} on {plan.gpu}")


def fix_text(plan: Plan) -> str:
    """The smallest fix, then the alternatives, as one line each."""
    if not plan.fixes:
        return "no single change fits: use a smaller or quantized model, or more/larger GPUs"
    first, *rest = plan.fixes
    text = f"set {first.field}: {first.value} ({first.why})"
    return text + "".join(f"\n  or: set {f.field}: {f.value} ({f.why})" for f in rest)


def sizing_problems(d: Deployment) -> list[Problem]:
    """Sizing findings for `inferry validate`: an error when it does not fit, warnings from the notes."""
    try:
        plan = plan_with_fixes(d)
    except InferryError as e:
        return [Problem(e.where or "model", e.message, hint=e.fix)]
    v = plan.verdict
    problems = [Problem("engine", note, severity="warning") for note in v.notes]
    if not v.fits:
        problems.append(Problem(v.field, v.reason, hint=fix_text(plan).replace("\n  ", "; ")))
    return problems
