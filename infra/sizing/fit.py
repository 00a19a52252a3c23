"""Refuse what does not fit, with the smallest stack-file changes that would make it fit."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from infra.sizing import catalog
from infra.stack.config import Deployment
from infra.engines.registry import engine_for
from infra.errors import InferryError, Problem
from infra.sizing.modelinfo import ModelInfo, Reader
from infra.sizing.plan import Fix, Plan, evaluate, make_plan
from infra.sizing.memory import max_fitting_context

TP_CHOICES = (1, 2, 4, 8)


def with_fields(d: Deployment, section: str, **changes: Any) -> Deployment:
    """A copy of the deployment with some fields of one section changed."""
    part = getattr(d, section).model_copy(update=changes)
    return d.model_copy(update={section: part})


# (every stack field the change sets, in the order to print; why; the changed deployment)
Candidate = tuple[dict[str, Any], str, Deployment]


def _candidates(d: Deployment, info: ModelInfo) -> Iterator[Candidate]:
    """The changes in the order a user would try them: free first, then GPUs."""
    e, gpu = d.engine, catalog.resolve_gpu(d.provider.gpu)
    if e.kv_cache_dtype == "auto" and gpu.fp8:
        yield ({"engine.kv_cache_dtype": "fp8"}, "halves the KV cache per token",
               with_fields(d, "engine", kv_cache_dtype="fp8"))
    if e.quantization is None and (gpu.fp8 or engine_for(e.kind).sizing.fp8_weight_only):
        yield {"engine.quantization": "fp8"}, "halves the weights", with_fields(d, "engine", quantization="fp8")
    if d.model.slots > 1:
        yield ({"model.adapter_slots": 1}, "one adapter slot on the GPU: the adapters take turns",
               with_fields(d, "model", adapter_slots=1))
    inp, _, _ = evaluate(d, info)
    ctx = max_fitting_context(inp)
    if 0 < ctx < inp.max_model_len:
        why = ("the model's maximum context" if ctx == info.arch.max_context
               else f"the longest context that fits, down from {inp.max_model_len:,}")
        yield {"engine.max_model_len": ctx}, why, with_fields(d, "engine", max_model_len=ctx)
    yield from _tp_candidates(d)
    for other in sorted(catalog.gpus().values(), key=lambda g: g.memory_mib):
        if other.memory_mib > gpu.memory_mib or (other.fp8 and not gpu.fp8):
            yield ({"provider.gpu": other.key}, f"{other.memory_mib:,} MiB per GPU, same count",
                   with_fields(d, "provider", gpu=other.key))


def _tp_candidates(d: Deployment) -> Iterator[Candidate]:
    """More GPUs per replica (more memory), then fewer (a TP that divides the heads), nearest first; the GPU
    count follows: TP x PP GPUs are what the replica uses."""
    tp, pp = d.engine.tensor_parallel_size, d.engine.pipeline_parallel_size
    larger = [t for t in TP_CHOICES if t > tp]
    for t in larger + sorted((t for t in TP_CHOICES if t < tp), reverse=True):
        count = max(d.provider.gpu_count, t * pp) if t > tp else t * pp
        changed = with_fields(with_fields(d, "engine", tensor_parallel_size=t), "provider", gpu_count=count)
        changes = {"engine.tensor_parallel_size": t}
        if count != d.provider.gpu_count:
            changes["provider.gpu_count"] = count
        yield changes, f"{t * pp} GPU(s) per replica", changed


def find_fixes(d: Deployment, info: ModelInfo, limit: int = 3) -> list[Fix]:
    """Up to `limit` single changes that fit, the smallest first; at most one per field."""
    found: list[Fix] = []
    for changes, why, changed in _candidates(d, info):
        field, value = next(iter(changes.items()))
        if any(f.field == field for f in found):
            continue
        try:
            _, verdict, _ = evaluate(changed, info)
        except InferryError:
            continue
        if verdict.fits:
            found.append(Fix(field, value, why, verdict, changes))
        if len(found) >= limit:
            break
    return found


def plan_with_fixes(d: Deployment, measured_tps: float | None = None, read: Reader | None = None) -> Plan:
    """The plan, with the fixes that fit when the deployment itself does not."""
    plan = make_plan(d, measured_tps, read)
    return plan if plan.verdict.fits else replace(plan, fixes=find_fixes(d, plan.model))


def fix_text(plan: Plan) -> str:
    """The smallest fix, then the alternatives, as one line each."""
    if not plan.fixes:
        return "no single change fits: use a smaller or quantized model, or more/larger GPUs"
    first, *rest = plan.fixes
    return f"set {_sets(first)}" + "".join(f"\n  or: set {_sets(f)}" for f in rest)


def _sets(f: Fix) -> str:
    return ", ".join(f"{k}: {v}" for k, v in f.changes.items()) + f" ({f.why})"


def _note(note: str) -> Problem:
    """A warning; a note that starts with the field it is about is filed under that field."""
    field, _, rest = note.partition(" ")
    if field.startswith(("engine.", "provider.")):
        return Problem(field, rest, severity="warning")
    return Problem("engine", note, severity="warning")


def sizing_problems(d: Deployment) -> list[Problem]:
    """Sizing findings for `inferry validate`: an error when it does not fit, warnings from the notes."""
    try:
        plan = plan_with_fixes(d)
    except InferryError as e:
        return [Problem(e.where or "model", e.message, hint=e.fix)]
    v = plan.verdict
    problems = [_note(n) for n in v.notes]
    if not v.fits:
        problems.append(Problem(v.field, v.reason, hint=fix_text(plan).replace("\n  ", "; ")))
    return problems
