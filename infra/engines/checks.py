"""`inferry validate` checks for the engine section: rules fed with GPU and model facts."""
from __future__ import annotations

from dataclasses import dataclass

from infra.stack.config import Deployment, TrtllmEngine, VllmEngine
from infra.engines import rules
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


def served_name_problems(d: Deployment) -> list[Problem]:
    """TensorRT-LLM lists a model under its folder's name (no option chooses it): say so when that is not
    model.name. Requests for model.name still work: trtllm-serve never checks the requested model
    (tensorrt_llm/serve/openai_server.py, OpenAIServer.openai_chat), and the health gate waits for the listed name."""
    from infra.engines.trtllm import service_spec

    served = service_spec(d).served_model_name
    if served == d.model.name:
        return []
    return [Problem("model.name", f"TensorRT-LLM lists this model as {served!r} in /v1/models (the name of its "
                    "folder: trtllm-serve has no option to choose it); requests for model.name are served too",
                    found=d.model.name, hint=f"to list it as {d.model.name!r}, name the weights' folder (the last "
                    "part of model.weights) after model.name", severity="warning")]


def engine_checks(d: Deployment) -> list[Problem]:
    """Every engine finding for a schema-valid deployment (errors and warnings)."""
    e = d.engine
    problems: list[Problem] = []
    cc = gpu_capability(d.provider.gpu)
    if cc is not None:
        fp8_compute = e.quantization == "fp8" or (isinstance(e, TrtllmEngine) and e.build is not None
                                                  and e.build.qformat == "fp8")
        problems += rules.fp8_rule(e.kind, fp8_compute, e.kv_cache_dtype != "auto", cc)
    facts = model_facts(d)
    if facts is not None:
        problems += rules.tp_rule(e.tensor_parallel_size, facts.heads, facts.kv_heads)
        problems += rules.context_rule(e.max_model_len, facts.max_context)
    if isinstance(e, TrtllmEngine):
        problems += rules.trtllm_rules(d) + served_name_problems(d)
    if isinstance(e, (VllmEngine, TrtllmEngine)) and not any(p.path == "engine.backend" for p in problems):
        problems += rules.option_rule(d)
    if isinstance(e, VllmEngine):  # it says nothing when the parser already refuses the command line
        from infra.engines.vllm_startup import startup_problems

        problems += startup_problems(d, facts.max_context if facts else None)
    return problems
