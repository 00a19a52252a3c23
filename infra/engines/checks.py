"""`inferry validate` checks for the engine section: rules fed with GPU and model facts."""
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
    return problems + engine.startup_rules(d, facts.max_context if facts else None)


def prompt_logging_problems(d: Deployment) -> list[Problem]:
    """extra_args that turn on one of the engine's prompt or output logs, unless serving.log_prompts allows it."""
    from infra.engines import options

    engine, extra = engine_for(d.engine.kind), list(getattr(d.engine, "extra_args", ()))
    if d.serving.log_prompts or not engine.prompt_logging or not extra:
        return []
    args = list(engine.service_spec(d).args)  # extra_args come last (each engine's service_spec)
    try:
        base = vars(options.parse(engine.snapshot, d.engine.version, args[: len(args) - len(extra)]))
        got = vars(options.parse(engine.snapshot, d.engine.version, args))
    except options.OptionError:
        return []  # option_problems names the flag it refuses
    on = [dest for dest in engine.prompt_logging if got.get(dest) and got.get(dest) != base.get(dest)]
    return [Problem("engine.extra_args", f"--{dest.replace('_', '-')} logs prompts or outputs in the engine's log",
                    hint="remove it, or set serving.log_prompts: true to keep them on purpose (the record of "
                    "processing then says prompts are kept)") for dest in on]
