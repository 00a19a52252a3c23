"""vLLM's `inferry validate` rules: the command line against its parser, then what start-up would refuse."""
from __future__ import annotations

from infra.stack.config import Deployment
from infra.engines import rules
from infra.engines.vllm import service
from infra.errors import Problem


def option_problems(d: Deployment) -> list[Problem]:
    """Every rendered flag, extra_args included, exists in the pinned version's parser."""
    spec = service.service_spec(d)
    return rules.snapshot_problems(spec) or rules.argv_problems(spec, "engine.extra_args")


def startup_rules(d: Deployment, model_max: int | None) -> list[Problem]:
    """What `vllm serve` refuses once it has parsed the line (says nothing when the parser already refuses it)."""
    from infra.engines.vllm.startup import startup_problems

    return startup_problems(d, model_max)


def fp8_compute(e) -> bool:
    """FP8 quantization asked for."""
    return e.quantization == "fp8"
