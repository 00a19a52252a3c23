"""SGLang as an inferry engine: ENGINE is everything the rest of inferry asks of it."""
from __future__ import annotations

from infra.engines.contract import Engine
from infra.engines.sglang import rules
from infra.engines.sglang.config import VERSION, SglangEngine
from infra.engines.sglang.service import CUDA, FLAGS, IMAGE, LORA, METRICS, service_spec
from infra.engines.sglang.sizing import SIZING

__all__ = ["ENGINE", "FLAGS", "IMAGE", "SglangEngine", "service_spec"]

STARTER = f"""\
kind: sglang                           # pinned SGLang {VERSION}
max_model_len: 32768                   # --context-length; sizing checks the KV pool for it
mem_fraction_static: 0.85              # weights + KV pool as a share of GPU memory
tensor_parallel_size: 1
"""

ENGINE = Engine(
    kind="sglang", label="SGLang", config=SglangEngine, starter=STARTER, image=IMAGE, cuda=CUDA,
    snapshot="sglang", service_spec=service_spec, config_rules=lambda d: [], option_problems=rules.option_problems,
    startup_rules=rules.startup_rules, fp8_compute=rules.fp8_compute, sizing=SIZING, health_path="/health",
    # SGLang checks --api-key itself (utils/auth.py); /health and /metrics stay open for probes and scrapers.
    lists_model_as="served_name", metrics=METRICS, needs_auth_proxy=False, exact_output_length=True,
    # SGLang 0.5.23: --log-requests logs each request's text (arg_groups/fields/observability.py)
    prompt_logging=("log_requests",), lora=LORA,
)
