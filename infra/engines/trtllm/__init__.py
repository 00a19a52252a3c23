"""TensorRT-LLM as an inferry engine: ENGINE is everything the rest of inferry asks of it."""
from __future__ import annotations

from infra.stack.config_engines import TRTLLM_VERSION, TrtllmEngine
from infra.engines.contract import Engine
from infra.engines.trtllm import rules
from infra.engines.trtllm.service import CUDA, IMAGE, USAGE_OFF, config_yaml, served_name, service_spec
from infra.engines.trtllm.sizing import SIZING

__all__ = ["ENGINE", "IMAGE", "config_yaml", "served_name", "service_spec"]

STARTER = f"""\
kind: tensorrt-llm                     # pinned TensorRT-LLM {TRTLLM_VERSION}
backend: pytorch                       # `tensorrt` builds an engine (1.2 line only)
max_model_len: 32768
kv_cache_free_gpu_memory_fraction: 0.9
tensor_parallel_size: 1
"""

ENGINE = Engine(
    kind="tensorrt-llm", label="TensorRT-LLM", config=TrtllmEngine, starter=STARTER, image=IMAGE, cuda=CUDA, snapshot="trtllm",
    service_spec=service_spec, config_rules=rules.config_rules, option_problems=rules.option_problems,
    startup_rules=lambda d, model_max: [], fp8_compute=rules.fp8_compute, sizing=SIZING, health_path="/health",
    # trtllm-serve's /metrics is beta iteration statistics, not a queue gauge: no default to scale on.
    lists_model_as="folder", metrics=None, needs_auth_proxy=True, exact_output_length=False, usage_off=USAGE_OFF,
    lora_refusal="inferry does not render TensorRT-LLM's adapters (the LLM API's lora_config) yet: its "
    "OpenAI server lists the model's folder as its one model, so a client could not name an adapter",
)
