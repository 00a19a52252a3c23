"""`inferry validate` checks for the engine section: rules fed with GPU and model facts, and model.adapters."""
from __future__ import annotations

from dataclasses import dataclass

from infra.stack.config import Deployment
from infra.engines import rules
from infra.engines.registry import engine_for
from infra.errors import Problem


@dataclass(frozen=True)
class ModelFacts:
    """What the engine rules need to know about a model."""

    heads: int
    kv_heads: int
    max_context: int


def gpu_capability(gpu: object) -> float | None:
    """Compute capability of provider.gpu (a catalog key or a declared GPU), or None when unknown."""
    try:
        from infra.sizing.catalog import resolve_gpu  # the catalog is another module's; optional here
        return float(resolve_gpu(gpu).compute_capability)
    except Exception:  # noqa: BLE001 - no catalog, or the GPU is not in it: the rule is skipped
        return None


def model_facts(d: Deployment) -> ModelFacts | None:
    """Heads and context from model.architecture, else the catalog, else None (rules skipped)."""
    a = d.model.architecture
    if a is None:
        try:
            from infra.sizing.catalog import find_model
            a = find_model(d.model.catalog or d.model.name)
        except Exception:  # noqa: BLE001 - no catalog: the rules that need it are skipped
            a = None
    if a is None:
        return None
    return ModelFacts(a.num_attention_heads, a.num_kv_heads, a.max_context)


def engine_checks(d: Deployment) -> list[Problem]:
    """Every engine finding for a schema-valid deployment (errors and warnings), asked of its engine."""
    e, engine = d.engine, engine_for(d.engine.kind)
    problems: list[Problem] = []
    cc = gpu_capability(d.provider.gpu)
    if cc is not None:
        problems += rules.fp8_rule(engine.sizing.fp8_weight_only, engine.fp8_compute(e),
                                   e.kv_cache_dtype != "auto", cc)
    facts = model_facts(d)
    if facts is not None:
        problems += rules.tp_rule(e.tensor_parallel_size, facts.heads, facts.kv_heads)
        problems += rules.context_rule(e.max_model_len, facts.max_context)
    problems += engine.config_rules(d) + engine.option_problems(d) + prompt_logging_problems(d)
    problems += adapter_problems(d)
    return problems + engine.startup_rules(d, facts.max_context if facts else None)


def extra_changes(d: Deployment) -> dict:
    """The options engine.extra_args change (dest -> the value they leave), compared with the rendered line
    without them; empty when there are none, or when the line does not parse (option_problems says why)."""
    from infra.engines import options

    engine, extra = engine_for(d.engine.kind), list(getattr(d.engine, "extra_args", ()))
    if not extra:
        return {}
    args = list(engine.service_spec(d).args)  # extra_args come last (each engine's service_spec)
    try:
        base = vars(options.parse(engine.snapshot, d.engine.version, args[: len(args) - len(extra)]))
        got = vars(options.parse(engine.snapshot, d.engine.version, args))
    except options.OptionError:
        return {}
    return {k: v for k, v in got.items() if v != base.get(k)}


def prompt_logging_problems(d: Deployment) -> list[Problem]:
    """extra_args that turn on one of the engine's prompt or output logs, unless serving.log_prompts allows it."""
    engine = engine_for(d.engine.kind)
    if d.serving.log_prompts or not engine.prompt_logging:
        return []
    changed = extra_changes(d)
    on = [dest for dest in engine.prompt_logging if changed.get(dest)]
    return [Problem("engine.extra_args", f"--{dest.replace('_', '-')} logs prompts or outputs in the engine's log",
                    hint="remove it, or set serving.log_prompts: true to keep them on purpose (the record of "
                    "processing then says prompts are kept)") for dest in on]


def adapter_problems(d: Deployment) -> list[Problem]:
    """What validate refuses about model.adapters for the stack's engine, before anything is fetched."""
    if not d.model.adapters:
        return []
    engine = engine_for(d.engine.kind)
    if engine.lora is None:
        return [Problem("model.adapters", f"{engine.label} cannot serve them: {engine.lora_refusal}",
                        hint="serve the adapters with engine.kind vllm or sglang, or remove model.adapters")]
    if getattr(d.engine, "streams_weights", False):
        return [Problem("model.adapters", "the engine streams the model from the store (load_format "
                        "runai_streamer), but it reads adapters from a local folder that is then never fetched",
                        hint="drop load_format: runai_streamer (the model is fetched too), or remove model.adapters")]
    problems = _rank_problems(d, engine.label, engine.lora.ranks(d.engine.version))
    return problems + _owned(d, engine)


def _rank_problems(d: Deployment, label: str, accepted: tuple[int, ...] | None) -> list[Problem]:
    if accepted is None:
        return []
    top = max(accepted)
    return [Problem(f"model.adapters[{i}].rank", f"adapter {a.name!r} has rank {a.rank}; {label} "
                    f"{d.engine.version} serves ranks up to {top} (--max-lora-rank: {', '.join(map(str, accepted))})",
                    hint=f"retrain or merge the adapter at rank {top} or less, or serve it with another engine")
            for i, a in enumerate(d.model.adapters) if a.rank > top]


def _owned(d: Deployment, engine) -> list[Problem]:
    """extra_args that set a LoRA flag: model.adapters renders them (one owner; the later flag would win).
    Compared without the adapters' flags, so an extra --enable-lora that repeats inferry's is named too."""
    bare = d.model_copy(update={"model": d.model.model_copy(update={"adapters": [], "adapter_slots": None})})
    changed = extra_changes(bare)
    return [Problem("engine.extra_args", f"--{dest.replace('_', '-')} is set by inferry from model.adapters",
                    hint=f"remove --{dest.replace('_', '-')} from engine.extra_args (model.adapters and "
                    "model.adapter_slots say what it renders)")
            for dest in engine.lora.dests if dest in changed]
