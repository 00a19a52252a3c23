"""SGLang: the stack's engine and model sections -> a `python3 -m sglang.launch_server` ServiceSpec (pure)."""
from __future__ import annotations

from infra.engines.common import Flag, hf_env, render_flags, weights_dir
from infra.engines.lora import adapter_weights, rank_limit
from infra.engines.sglang.config import SglangEngine
from infra.engines.contract import LoraSupport, MetricNames
from infra.engines.spec import MODELS_DIR, EnvVar, ServiceSpec
from infra.stack.config import Deployment
from infra.stack.secretfix import SecretField

IMAGE = "lmsysorg/sglang:v{version}"  # Docker Hub tags are v<release> (docs.sglang.io, install with Docker)
LAUNCH = ("python3", "-m", "sglang.launch_server")
# The CUDA release of the default image (the v0.5 images are built on CUDA 12.9: docker/Dockerfile CUDA_VERSION).
CUDA = "12.9"
# Its Prometheus names (sglang/srt/observability/metrics_collector.py:365-405, 2041; labels include model_name).
METRICS = MetricNames(kv_usage="sglang:token_usage", running="sglang:num_running_reqs",
                      waiting="sglang:num_queue_reqs", ttft="sglang:time_to_first_token_seconds")
QUEUE_METRIC = METRICS.waiting
KEY_ENV = "INFERRY_SGLANG_API_KEY"  # read by the launch wrapper below, never by SGLang itself
# SGLang takes the key only as --api-key (arg_groups/fields/serving.py:160; no environment variable), and reads a
# --config YAML once, merging it into its argv in-process (utils/server_args_config_parser.py:75). So the key goes
# from the environment through a named pipe SGLang opens as its --config: it never lands in a file on disk, nor
# on any process's command line. The pipe's name must end in .yaml or .yml (_validate_yaml_file refuses any other
# suffix; it only checks that the path exists), so it is a fixed name in a fresh 0700 folder (`mktemp -d` is the
# same in GNU and busybox). The writer blocks until SGLang opens the pipe, then removes the folder; a watcher
# gives up after 900 s if SGLang never reads it (it died first) and exits as soon as the folder is gone.
WRAPPER = ('umask 077; d=$(mktemp -d) || exit 1; f="$d/inferry-auth.yaml"; mkfifo "$f" || exit 1; '
           '( { printf "api-key: \'%s\'\\n" "$(printf %s "$' + KEY_ENV + '" | sed "s/\'/\'\'/g")" > "$f"; '
           'rm -rf "$d"; } & w=$!; i=0; while [ -e "$f" ] && [ $i -lt 900 ]; do sleep 1; i=$((i+1)); done; '
           'kill $w 2>/dev/null; rm -rf "$d" ) & '
           'exec python3 -m sglang.launch_server "$@" --config "$f"')
COMMAND = ("sh", "-c", WRAPPER, "sglang.launch_server")
# SGLang's NEXTN is multi-token prediction; STANDALONE a separate draft model (speculative_hook.py).
ALGORITHMS = {"eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN", "draft_model": "STANDALONE", "ngram": "NGRAM"}


def _e(d: Deployment) -> SglangEngine:
    assert isinstance(d.engine, SglangEngine)
    return d.engine


def _dtype(d: Deployment) -> str | None:
    dtype = _e(d).dtype if _e(d).dtype != "auto" else d.model.dtype
    return None if dtype == "auto" else dtype


def _kv_dtype(d: Deployment) -> str | None:
    # SGLang names FP8 KV caches by format only (fp8_e4m3 / fp8_e5m2; no plain "fp8").
    kv = _e(d).kv_cache_dtype
    return None if kv == "auto" else {"fp8": "fp8_e4m3"}.get(kv, kv)


def _parallel(n: int) -> int | None:
    return None if n == 1 else n


# Every stack field that becomes a launch_server flag (the snapshot proves each exists in the pinned parser).
FLAGS: tuple[Flag, ...] = (
    Flag("--served-model-name", lambda d: d.model.name),
    Flag("--host", lambda d: "0.0.0.0"),
    Flag("--port", lambda d: d.serving.port),
    Flag("--dtype", _dtype),
    Flag("--context-length", lambda d: _e(d).max_model_len),
    Flag("--mem-fraction-static", lambda d: _e(d).mem_fraction_static),
    Flag("--tp-size", lambda d: _parallel(_e(d).tensor_parallel_size)),
    Flag("--pp-size", lambda d: _parallel(_e(d).pipeline_parallel_size)),
    Flag("--dp-size", lambda d: _parallel(_e(d).data_parallel_size)),
    Flag("--quantization", lambda d: _e(d).quantization),
    Flag("--kv-cache-dtype", _kv_dtype),
    Flag("--chunked-prefill-size", lambda d: _e(d).chunked_prefill_size),
    Flag("--max-running-requests", lambda d: _e(d).max_running_requests),
    # /metrics exists only with it (entrypoints/http_server.py:314): status, drain and autoscaling read it.
    Flag("--enable-metrics", lambda d: True, style="on"),
)


# The flags speculative_args renders (owned by engine.speculative: extra_args may not set them).
SPECULATIVE_FLAGS = ("--speculative-algorithm", "--speculative-draft-model-path", "--speculative-num-steps",
                     "--speculative-eagle-topk", "--speculative-num-draft-tokens", "--speculative-ngram-max-trie-depth")


def speculative_args(d: Deployment, draft_dir: str | None) -> list[str]:
    """--speculative-* flags: the algorithm, its draft weights, and steps drafted (one token per step)."""
    s = _e(d).speculative
    if s is None:
        return []
    args = ["--speculative-algorithm", ALGORITHMS[s.method]]
    if s.model is not None:
        args += ["--speculative-draft-model-path", draft_dir or s.model]
    if s.method == "ngram":
        # Only the last speculative_ngram_max_trie_depth tokens are matched (speculative/ngram_worker.py:247):
        # the longest n-gram looked up, vLLM's prompt_lookup_max.
        return args + ["--speculative-num-draft-tokens", str(s.num_speculative_tokens + 1),
                       "--speculative-ngram-max-trie-depth", str(s.prompt_lookup_max)]
    return args + ["--speculative-num-steps", str(s.num_speculative_tokens), "--speculative-eagle-topk", "1",
                   "--speculative-num-draft-tokens", str(s.num_speculative_tokens + 1)]


# The flags lora_args renders (arg_groups/fields/lora.py): model.adapters owns them. SGLang takes any rank limit.
LORA = LoraSupport(dests=("enable_lora", "lora_paths", "max_loras_per_batch", "max_lora_rank", "max_loaded_loras"),
                   rank_option="max_lora_rank", ranks=lambda _version: None)


def lora_args(d: Deployment, paths: tuple[tuple[str, str], ...]) -> list[str]:
    """--enable-lora with each adapter as NAME=PATH in --lora-paths (the name is what a request's model names),
    the adapters in one batch and the rank limit (SGLang infers it from the adapters; set, it is checked)."""
    if not d.model.adapters:
        return []
    named = [f"{a.name}={path}" for a, (_, path) in zip(d.model.adapters, paths)]
    return ["--enable-lora", "--lora-paths", *named, "--max-loras-per-batch", str(d.model.slots),
            "--max-lora-rank", str(rank_limit(d, None))]


def _draft(d: Deployment, models_dir: str) -> tuple[tuple[str, str], ...]:
    s = _e(d).speculative
    if s is None or not s.model or not s.model.startswith("s3://"):
        return ()
    return ((s.model, weights_dir(s.model, models_dir)),)


def service_spec(d: Deployment, model_dir: str | None = None, models_dir: str = MODELS_DIR,
                 config_dir: str | None = None) -> ServiceSpec:
    """The launch_server service for a deployment; model_dir is where the target put the weights."""
    e = _e(d)
    model = model_dir or weights_dir(d.weights_uri, models_dir)
    draft = _draft(d, models_dir)
    adapters = adapter_weights(d, models_dir)
    args = ["--model-path", model, *render_flags(FLAGS, d), *speculative_args(d, draft[0][1] if draft else None),
            *lora_args(d, adapters)]
    env = [EnvVar(KEY_ENV, secret=d.serving.api_key, secret_field=SecretField.API_KEY), *hf_env(d)]
    return ServiceSpec(
        engine="sglang", version=e.version, image=e.image or IMAGE.format(version=e.version), command=COMMAND,
        args=tuple(args + e.extra_args), env=tuple(env), port=d.serving.port, gpus=e.gpus,
        served_model_name=d.model.name, model_dir=model, extra_weights=draft + adapters, cuda_requirement=CUDA,
        queue_metric=QUEUE_METRIC, labels={"inferry.engine": "sglang", "inferry.model": d.model.name},
    )
