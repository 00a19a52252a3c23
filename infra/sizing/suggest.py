"""`plan --suggest`: catalog GPUs x providers that fit the stack's model and context, cheapest CPM first."""
from __future__ import annotations

from dataclasses import dataclass

from infra.sizing import catalog
from infra.stack.config import Deployment
from infra.sizing.cost import cpm, decode_estimate, usd_per_hour
from infra.errors import InferryError
from infra.sizing.fit import with_fields
from infra.sizing.modelinfo import ModelInfo, resolve
from infra.sizing.plan import evaluate, max_seqs
from infra.stack.regions import in_eu
from infra.sizing.memory import Verdict

TP_OPTIONS = (1, 2, 4, 8)


@dataclass(frozen=True)
class Option:
    """One way to serve the stack's model: where, on what, and what it costs."""

    provider: str
    region: str
    gpu: str
    gpus: int
    usd_per_hour: float
    tokens_per_second: float
    cpm_usd: float
    kv_capacity_tokens: int


def _smallest_fit(d: Deployment, info: ModelInfo, gpu: str) -> tuple[int, Verdict] | None:
    """The fewest GPUs (tensor parallel) of this kind that fit, with the verdict."""
    pp = d.engine.pipeline_parallel_size
    for tp in TP_OPTIONS:
        changed = with_fields(with_fields(d, "engine", tensor_parallel_size=tp), "provider", gpu=gpu, gpu_count=tp * pp)
        try:
            inp, verdict, _ = evaluate(changed, info)
        except InferryError:
            return None
        if verdict.fits:
            return tp * pp, verdict
    return None


def _region(d: Deployment, regions: tuple[str, ...]) -> str | None:
    if d.policy.residency != "eu":
        return regions[0] if regions else None
    return next((r for r in regions if in_eu(r, d.policy.allowed_regions)), None)


def suggest(d: Deployment) -> list[Option]:
    """Every (provider, GPU) with a list price where the model fits, cheapest per million tokens first."""
    info = resolve(d)
    options = []
    for gpu in catalog.gpus().values():
        fit = _smallest_fit(d, info, gpu.key)
        if fit is None:
            continue
        gpus, v = fit
        tps, _ = decode_estimate(v.budget.weights, v.kv_bytes_per_token_per_gpu, gpu, v.kv_capacity_tokens,
                                 max_seqs(d, gpu))
        for prov in catalog.providers().values():
            price, region = prov.price(gpu.key), _region(d, prov.regions)
            if price is None or region is None:
                continue
            hourly = usd_per_hour(price, gpus)
            options.append(Option(prov.key, region, gpu.key, gpus, round(hourly, 4), round(tps, 1),
                                  round(cpm(hourly, tps), 4), v.kv_capacity_tokens))
    return sorted(options, key=lambda o: o.cpm_usd)


def why_no_option(d: Deployment) -> str:
    """Why suggest() found nothing: no catalog GPU fits, or none of those that fit has a price (in the EU)."""
    info = resolve(d)
    fitting = [g.key for g in catalog.gpus().values() if _smallest_fit(d, info, g.key) is not None]
    ctx = d.engine.max_model_len or info.arch.max_context
    if not fitting:
        return (f"no catalog GPU fits {info.arch.key} at max_model_len {ctx:,} with up to {max(TP_OPTIONS)} GPUs "
                "per replica; lower engine.max_model_len or quantize (engine.quantization: fp8)")
    where = " in an EU region (policy.residency: eu)" if d.policy.residency == "eu" else ""
    return (f"{', '.join(fitting)} fit, but no catalog provider lists a price for them{where}; "
            "compare prices by hand with provider.price_per_gpu_hour")
