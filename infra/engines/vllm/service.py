"""vLLM: the stack's engine and model sections -> a `vllm serve` ServiceSpec (pure)."""
from __future__ import annotations

import json

from infra.stack.config import Deployment, VllmEngine
from infra.engines import options
from infra.engines.common import Flag, hf_env, render_flags, s3_env, weights_dir
from infra.engines.contract import LoraSupport, MetricNames
from infra.engines.lora import adapter_weights, choices, rank_limit
from infra.engines.spec import EnvVar, ServiceSpec

IMAGE = "vllm/vllm-openai:v{version}"  # Docker Hub tags are v<release>
COMMAND = ("vllm", "serve")
# vLLM reports usage to its maintainers by default (vllm/usage/usage_lib.py): off by both of its switches.
USAGE_OFF = ("VLLM_NO_USAGE_STATS", "VLLM_DO_NOT_TRACK")
# The CUDA release its images are built on (vLLM docker/Dockerfile ARG CUDA_VERSION=12.9.1).
CUDA = "12.9"
# Its Prometheus names (vllm/v1/metrics/loggers.py PrometheusStatLogger; labels include model_name); the queue
# gauge is what an autoscaler follows by default.
METRICS = MetricNames(kv_usage="vllm:kv_cache_usage_perc", running="vllm:num_requests_running",
                      waiting="vllm:num_requests_waiting", ttft="vllm:time_to_first_token_seconds")
QUEUE_METRIC = METRICS.waiting


def _e(d: Deployment) -> VllmEngine:
    assert isinstance(d.engine, VllmEngine)
    return d.engine


def _dtype(d: Deployment) -> str | None:
    dtype = _e(d).dtype if _e(d).dtype != "auto" else d.model.dtype
    return None if dtype == "auto" else dtype


def _parallel(n: int) -> int | None:
    return None if n == 1 else n


def speculative_json(d: Deployment, draft_dir: str | None) -> str | None:
    """--speculative-config as compact JSON (vLLM docs, features/spec_decode: method + fields)."""
    s = _e(d).speculative
    if s is None:
        return None
    conf: dict = {"method": s.method, "num_speculative_tokens": s.num_speculative_tokens}
    if s.model is not None:
        conf["model"] = draft_dir or s.model
    if s.prompt_lookup_max is not None:
        conf["prompt_lookup_max"] = s.prompt_lookup_max
    if s.prompt_lookup_min is not None:
        conf["prompt_lookup_min"] = s.prompt_lookup_min
    return json.dumps(conf, separators=(",", ":"), sort_keys=True)


# Every stack field that becomes a `vllm serve` flag, in one table (flags as in vLLM 0.33's parser;
# the snapshot in infra/engines/snapshots/ proves each exists).
FLAGS: tuple[Flag, ...] = (
    Flag("--served-model-name", lambda d: d.model.name),
    Flag("--host", lambda d: "0.0.0.0"),
    Flag("--port", lambda d: d.serving.port),
    Flag("--load-format", lambda d: None if _e(d).load_format == "auto" else _e(d).load_format),
    Flag("--dtype", _dtype),
    Flag("--max-model-len", lambda d: _e(d).max_model_len),
    Flag("--gpu-memory-utilization", lambda d: _e(d).gpu_memory_utilization),
    Flag("--tensor-parallel-size", lambda d: _parallel(_e(d).tensor_parallel_size)),
    Flag("--pipeline-parallel-size", lambda d: _parallel(_e(d).pipeline_parallel_size)),
    Flag("--quantization", lambda d: _e(d).quantization),
    Flag("--kv-cache-dtype", lambda d: None if _e(d).kv_cache_dtype == "auto" else _e(d).kv_cache_dtype),
    Flag("--enable-prefix-caching", lambda d: _e(d).enable_prefix_caching, style="switch"),
    Flag("--block-size", lambda d: _e(d).block_size),
    Flag("--max-num-seqs", lambda d: _e(d).max_num_seqs),
    Flag("--max-num-batched-tokens", lambda d: _e(d).max_num_batched_tokens),
    Flag("--enable-chunked-prefill", lambda d: _e(d).enable_chunked_prefill, style="switch"),
)


def _ranks(version: str) -> tuple[int, ...] | None:
    return choices(options.snapshot("vllm", version), "max_lora_rank")


# The flags lora_args renders (vllm/engine/arg_utils.py LoRAConfig fields): model.adapters owns them.
LORA = LoraSupport(dests=("enable_lora", "lora_modules", "max_loras", "max_lora_rank", "max_cpu_loras"),
                   rank_option="max_lora_rank", ranks=_ranks)


def lora_args(d: Deployment, paths: tuple[tuple[str, str], ...]) -> list[str]:
    """--enable-lora with each adapter in --lora-modules' JSON form (name, path, base_model_name: /v1/models
    lists the adapter with the served model as its parent), slots, the rank limit and the CPU cache."""
    if not d.model.adapters:
        return []
    modules = [json.dumps({"name": a.name, "path": path, "base_model_name": d.model.name}, separators=(",", ":"))
               for a, (_, path) in zip(d.model.adapters, paths)]
    slots = d.model.slots
    # max_cpu_loras below max_loras is refused (LoRAConfig.__post_init__): every adapter stays in host memory.
    return ["--enable-lora", "--lora-modules", *modules, "--max-loras", str(slots),
            "--max-lora-rank", str(rank_limit(d, _ranks(d.engine.version))),
            "--max-cpu-loras", str(max(slots, len(d.model.adapters)))]


def _draft(d: Deployment, models_dir: str) -> tuple[tuple[str, str], ...]:
    s = _e(d).speculative
    if s is None or not s.model or not s.model.startswith("s3://"):
        return ()
    return ((s.model, weights_dir(s.model, models_dir)),)


def service_spec(d: Deployment, model_dir: str | None = None, models_dir: str = "/models",
                 config_dir: str | None = None) -> ServiceSpec:
    """The `vllm serve` service for a deployment; model_dir is where the target put the weights (config_dir:
    unused, vLLM reads no config file)."""
    e = _e(d)
    streams = e.streams_weights
    model = d.weights_uri if streams else (model_dir or weights_dir(d.weights_uri, models_dir))
    draft = _draft(d, models_dir)
    spec_json = speculative_json(d, draft[0][1] if draft else None)
    args = [model, *render_flags(FLAGS, d)]
    if spec_json is not None:
        args += ["--speculative-config", spec_json]
    adapters = adapter_weights(d, models_dir)
    args += lora_args(d, adapters) + e.extra_args
    # vLLM reads the key from VLLM_API_KEY when --api-key is absent (vllm/envs.py): never on argv.
    env = [EnvVar("VLLM_API_KEY", secret=d.serving.api_key, secret_field="serving.api_key"), *hf_env(d, *USAGE_OFF)]
    if streams:
        env += s3_env(d)
    return ServiceSpec(
        engine="vllm", version=e.version, image=e.image or IMAGE.format(version=e.version),
        command=COMMAND, args=tuple(args), env=tuple(env), port=d.serving.port, gpus=e.gpus,
        served_model_name=d.model.name, model_dir=model, streams_weights=streams, extra_weights=draft + adapters,
        cuda_requirement=CUDA, queue_metric=QUEUE_METRIC,
        labels={"inferry.engine": "vllm", "inferry.model": d.model.name},
    )
