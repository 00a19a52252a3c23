"""vLLM as an inferry engine: ENGINE is everything the rest of inferry asks of it."""
from __future__ import annotations

from infra.stack.config_engines import VLLM_VERSION, VllmEngine
from infra.engines.contract import Engine
from infra.engines.vllm import rules
from infra.engines.vllm.service import CUDA, FLAGS, IMAGE, LORA, METRICS, USAGE_OFF, service_spec
from infra.engines.vllm.sizing import SIZING

__all__ = ["ENGINE", "FLAGS", "IMAGE", "service_spec"]

STARTER = f"""\
kind: vllm                             # pinned vLLM {VLLM_VERSION}
max_model_len: 32768                   # context per request; sizing checks KV cache for it
gpu_memory_utilization: 0.9            # share of GPU memory vLLM may take
tensor_parallel_size: 1
enable_prefix_caching: true
"""

ENGINE = Engine(
    kind="vllm", label="vLLM", config=VllmEngine, starter=STARTER, image=IMAGE, cuda=CUDA, snapshot="vllm",
    service_spec=service_spec, config_rules=lambda d: [], option_problems=rules.option_problems,
    startup_rules=rules.startup_rules, fp8_compute=rules.fp8_compute, sizing=SIZING, health_path="/health",
    lists_model_as="served_name", metrics=METRICS, needs_auth_proxy=False, exact_output_length=True,
    # vLLM 0.33: --enable-log-requests logs each prompt, --enable-log-outputs each output
    prompt_logging=("enable_log_requests", "enable_log_outputs"), usage_off=USAGE_OFF, lora=LORA,
)
