"""TensorRT-LLM: the stack's engine and model sections -> a `trtllm-serve` ServiceSpec (pure).

PyTorch backend by default: `trtllm-serve MODEL --backend pytorch ...` plus a `--config` YAML (LLM API
options; its pydantic models forbid unknown keys). The TensorRT backend (1.2 line only) first builds an
engine in a BuildStep: quantize.py, then trtllm-build; the engine is keyed by what it depends on.

trtllm-serve has no API-key check (NVIDIA/TensorRT-LLM issue #9950: "API key authentication", not on
the roadmap), so the engine binds 127.0.0.1:engine_port and `needs_auth_proxy` asks the target for an
authenticating proxy on the public port.
"""
from __future__ import annotations

import hashlib
import json
import posixpath
import shlex

import yaml

from infra.stack.config import Deployment, TrtllmEngine
from infra.stack.config_engines import TrtllmBuild
from infra.engines.common import Flag, hf_env, render_flags, weights_dir
from infra.engines.spec import MODELS_DIR, BuildStep, ServiceSpec, SpecFile
from infra.engines.trtllm.extra_options import deep_merge

IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:{version}"  # NGC tags are the release version
COMMAND = ("trtllm-serve",)
# TensorRT-LLM's usage telemetry (tensorrt_llm/usage) is on by default in the releases that have it; these are
# its switches (DO_NOT_TRACK, set for every engine, is a third). Releases without it ignore them.
USAGE_OFF = ("TRTLLM_NO_USAGE_STATS", "TELEMETRY_DISABLED")
CUDA = "13.0"  # the CUDA release of the 1.2 release container
CONFIG_DIR = "/etc/inferry"  # container path of the service's config folder
CONFIG_NAME = "trtllm-config.yaml"
ENGINES_DIR = "/engines"
# NGC release images ship the examples under /app/tensorrt_llm/examples (not verified for 1.2.1 here).
QUANTIZE = "/app/tensorrt_llm/examples/quantization/quantize.py"


def _e(d: Deployment) -> TrtllmEngine:
    assert isinstance(d.engine, TrtllmEngine)
    return d.engine


def engine_port(port: int) -> int:
    """Where the engine listens behind the auth proxy: a fixed internal port that is not the public one."""
    return 18000 if port != 18000 else 18001


def _parallel(n: int) -> int | None:
    return None if n == 1 else n


# Every stack field that becomes a trtllm-serve flag (names present in the 1.2 line's serve.py).
FLAGS: tuple[Flag, ...] = (
    Flag("--backend", lambda d: _e(d).backend),
    Flag("--host", lambda d: "127.0.0.1"),
    Flag("--port", lambda d: engine_port(d.serving.port)),
    Flag("--tp_size", lambda d: _parallel(_e(d).tensor_parallel_size)),
    Flag("--pp_size", lambda d: _parallel(_e(d).pipeline_parallel_size)),
    Flag("--max_batch_size", lambda d: _e(d).max_batch_size),
    Flag("--max_num_tokens", lambda d: _e(d).max_num_tokens),
    Flag("--max_seq_len", lambda d: _e(d).max_model_len),
    Flag("--kv_cache_free_gpu_memory_fraction", lambda d: _e(d).kv_cache_free_gpu_memory_fraction),
)

# TensorRT-LLM's decoding_type for each speculative method (llm_args.py *DecodingConfig classes).
DECODING_TYPE = {"ngram": "NGram", "draft_model": "Draft_Target", "eagle": "Eagle", "eagle3": "Eagle3", "mtp": "MTP"}


def speculative_config(d: Deployment, draft_dir: str | None) -> dict | None:
    """The `speculative_config` YAML mapping, or None."""
    s = _e(d).speculative
    if s is None:
        return None
    conf: dict = {"decoding_type": DECODING_TYPE[s.method]}
    if s.method == "mtp":
        conf["num_nextn_predict_layers"] = s.num_speculative_tokens
    else:
        conf["max_draft_len"] = s.num_speculative_tokens
    if s.model is not None:
        conf["speculative_model"] = draft_dir or s.model
    if s.prompt_lookup_max is not None:
        conf["max_matching_ngram_size"] = s.prompt_lookup_max
    return conf


def config_yaml(d: Deployment, draft_dir: str | None = None) -> dict:
    """The --config YAML as data: every stack field without a trtllm-serve flag maps here, once, and
    engine.extra_options merged in deeply (validate refuses a key both set)."""
    e = _e(d)
    kv: dict = {}
    if e.enable_block_reuse is not None:
        kv["enable_block_reuse"] = e.enable_block_reuse
    # The PyTorch backend names FP8 KV cache 'fp8' (KvCacheConfig.dtype); the TensorRT backend refuses the
    # key (TrtLlmArgs.validate_kv_cache_dtype): its engine build bakes FP8 KV cache in instead (build_step).
    if e.kv_cache_dtype != "auto" and e.backend == "pytorch":
        kv["dtype"] = "fp8"
    conf: dict = {}
    if kv:
        conf["kv_cache_config"] = kv
    if e.enable_chunked_prefill is not None:
        conf["enable_chunked_prefill"] = e.enable_chunked_prefill
    spec = speculative_config(d, draft_dir)
    if spec is not None:
        conf["speculative_config"] = spec
    conf = deep_merge(conf, e.extra_options)
    if "kv_cache_config" in conf:
        # The YAML block replaces the one --kv_cache_free_gpu_memory_fraction built (extra_options docstring).
        conf["kv_cache_config"] = {"free_gpu_memory_fraction": e.kv_cache_free_gpu_memory_fraction,
                                   **conf["kv_cache_config"]}
    return conf


def build_step(d: Deployment, weights: str, weights_digest: str | None = None) -> BuildStep:
    """The TensorRT engine build: quantize to a checkpoint, trtllm-build it, keyed by what it depends on."""
    e = _e(d)
    b = e.build or TrtllmBuild()
    options = b.model_dump() | {"tp": e.tensor_parallel_size, "pp": e.pipeline_parallel_size,
                                "max_batch_size": e.max_batch_size, "max_num_tokens": e.max_num_tokens,
                                "max_seq_len": e.max_model_len, "kv_cache_dtype": e.kv_cache_dtype}
    key_src = json.dumps({"weights": d.weights_uri, "digest": weights_digest, "gpu": d.provider.gpu_name,
                          "version": e.version, "options": options}, sort_keys=True)
    digest = hashlib.sha256(key_src.encode()).hexdigest()[:16]
    # trtllm-serve lists an engine folder under its own name: end the path with the model's name.
    out = f"{ENGINES_DIR}/{digest}/{posixpath.basename(d.model.name)}"
    q = ["python3", QUANTIZE, "--model_dir", weights, "--output_dir", "/tmp/inferry-ckpt",
         "--qformat", b.qformat, "--calib_size", str(b.calib_size), "--calib_dataset", b.calib_dataset,
         "--tp_size", str(e.tensor_parallel_size), "--pp_size", str(e.pipeline_parallel_size)]
    if e.kv_cache_dtype != "auto":
        q += ["--kv_cache_dtype", "fp8"]
    build = ["trtllm-build", "--checkpoint_dir", "/tmp/inferry-ckpt", "--output_dir", out,
             "--gemm_plugin", b.gemm_plugin, "--use_paged_context_fmha", "enable" if b.use_paged_context_fmha else "disable"]
    for flag, value in (("--max_batch_size", e.max_batch_size), ("--max_input_len", b.max_input_len),
                        ("--max_seq_len", e.max_model_len), ("--max_num_tokens", e.max_num_tokens)):
        if value is not None:
            build += [flag, str(value)]
    script = "set -eu\n" + shlex.join(q) + "\n" + shlex.join(build) + "\n"
    key = f"trtllm-engines/{d.model.name}/{e.version}/{d.provider.gpu_name}/{digest}"
    return BuildStep(image=e.image or IMAGE.format(version=e.version), script=script, cache_key=key, output_dir=out)


def served_name(model: str) -> str:
    """The model id trtllm-serve lists: a local folder's name, else the argument as given. It has no option to
    choose it (tensorrt_llm/serve/openai_server.py, OpenAIServer.__init__), so clients use this name."""
    return posixpath.basename(model.rstrip("/")) if model.startswith("/") else model


def service_spec(d: Deployment, model_dir: str | None = None, models_dir: str = MODELS_DIR,
                 weights_digest: str | None = None, config_dir: str = CONFIG_DIR) -> ServiceSpec:
    """The `trtllm-serve` service for a deployment; model_dir is where the target put the weights."""
    e = _e(d)
    weights = model_dir or weights_dir(d.weights_uri, models_dir)
    s = e.speculative
    draft = ((s.model, weights_dir(s.model, models_dir)),) if s and s.model and s.model.startswith("s3://") else ()
    build = build_step(d, weights, weights_digest) if e.backend == "tensorrt" else None
    model = build.output_dir if build else weights
    conf = config_yaml(d, draft[0][1] if draft else None)
    files: tuple[SpecFile, ...] = ()
    args = [model, *render_flags(FLAGS, d)]
    if conf:
        path = f"{config_dir.rstrip('/')}/{CONFIG_NAME}"
        files = (SpecFile(CONFIG_NAME, yaml.safe_dump(conf, sort_keys=True), path),)
        args += ["--config", path]
    return ServiceSpec(
        engine="tensorrt-llm", version=e.version, image=e.image or IMAGE.format(version=e.version),
        command=COMMAND, args=tuple(args), env=tuple(hf_env(d, *USAGE_OFF)), files=files, port=d.serving.port,
        gpus=e.gpus, served_model_name=served_name(model), model_dir=weights, build=build,
        needs_auth_proxy=True, engine_port=engine_port(d.serving.port), extra_weights=draft,
        cuda_requirement=CUDA, labels={"inferry.engine": "tensorrt-llm", "inferry.model": d.model.name},
    )
