"""The Engine contract: one descriptor per engine says everything the rest of inferry asks of an engine."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal

if TYPE_CHECKING:
    from infra.engines.spec import ServiceSpec
    from infra.errors import Problem
    from infra.sizing.catalog import GpuSpec
    from infra.stack.config import Deployment

# How an engine sizes its KV pool from its memory fraction: a share of all the GPU's memory (vLLM's
# gpu_memory_utilization: KV gets what weights and activations leave of it), or a share of what is still
# free after loading (TensorRT-LLM's kv_cache_free_gpu_memory_fraction).
KvShare = Literal["total", "free"]


@dataclass(frozen=True)
class SizingModel:
    """What infra/sizing asks of an engine to size one instance: its defaults and how it splits memory."""

    kv_share_of: KvShare
    memory_fraction: Callable[[Any], float]  # engine section -> the fraction kv_share_of applies to
    batched_tokens: Callable[[Deployment, GpuSpec], int]  # tokens per forward pass (activation memory)
    max_seqs: Callable[[Deployment, GpuSpec], int]  # sequences scheduled at once (throughput)
    block_size: Callable[[Any], int]  # engine section -> tokens per KV block
    quantization: Callable[[Any], str | None]  # engine section -> the weights' format as loaded
    dtype: Callable[[Deployment], str]  # the 16-bit dtype unquantized weights load in
    # FP8 on a GPU without FP8 tensor cores: True runs it weight-only (vLLM's Marlin kernels), False refuses.
    fp8_weight_only: bool


@dataclass(frozen=True)
class MetricNames:
    """The engine's Prometheus names for what `inferry status`, drain and autoscaling read from /metrics."""

    kv_usage: str  # gauge: the share 0..1 of the KV cache in use
    running: str  # gauge: requests in the running batch
    waiting: str  # gauge: requests queued (the autoscaling trigger's queue)
    ttft: str  # histogram: time to first token, seconds


@dataclass(frozen=True)
class LoraSupport:
    """How an engine serves the stack's LoRA adapters (model.adapters): the flags it renders, the ranks it takes."""

    dests: tuple[str, ...]  # argparse dests its LoRA flags set: extra_args may not set them beside model.adapters
    rank_option: str  # the dest of its rank limit (vLLM's and SGLang's max_lora_rank)
    # the rank limits its parser accepts (from the snapshot's choices); None: any positive integer
    ranks: Callable[[str], tuple[int, ...] | None]


@dataclass(frozen=True)
class Engine:
    """Everything inferry asks of one engine; each engine folder exports one as ENGINE."""

    kind: str  # the `engine.kind` tag in stack files
    label: str  # how messages name it
    config: type  # its `engine:` section: a pydantic model with `kind: Literal[<kind>]` (registered with the schema)
    starter: str  # the `engine:` lines `inferry init` writes (unindented YAML, commented)
    image: str  # default image, {version} from engine.version
    cuda: str  # CUDA release its image is built on: the host driver must support at least this
    snapshot: str  # option snapshot prefix: infra/engines/snapshots/<snapshot>-<version>.json
    # (deployment, model_dir=None, models_dir=MODELS_DIR, config_dir=...) -> the service targets run.
    service_spec: Callable[..., ServiceSpec]
    # `inferry validate`, in this order: combinations the engine refuses; flags, extra args and extra options
    # against the snapshot (with did-you-mean); what the parsed command line refuses at start-up (given the
    # model's maximum context, or None).
    config_rules: Callable[[Deployment], list[Problem]]
    option_problems: Callable[[Deployment], list[Problem]]
    startup_rules: Callable[[Deployment, int | None], list[Problem]]
    fp8_compute: Callable[[Any], bool]  # engine section -> it computes in FP8 (needs FP8 tensor cores)
    sizing: SizingModel
    health_path: str  # answers 200 once the model is loaded
    lists_model_as: Literal["served_name", "folder"]  # what /v1/models lists: model.name or the weights' folder
    metrics: MetricNames | None  # its Prometheus names; None: no Prometheus /metrics (trtllm-serve's is JSON)
    needs_auth_proxy: bool  # cannot check an API key itself: targets put an authenticating proxy in front
    exact_output_length: bool  # honours ignore_eos/min_tokens: bench asks for exact output lengths
    # argparse dests of its options that log prompts or outputs: refused unless serving.log_prompts
    prompt_logging: tuple[str, ...] = ()
    # its own usage-statistics switches, each set to 1 in its environment (DO_NOT_TRACK and the hub's for all)
    usage_off: tuple[str, ...] = ()
    # the OpenAI routes clients may call through the gateway (with a key); every other path is refused there:
    # metrics, docs, and the engines' admin and weight routes (vLLM's /pause, SGLang's /update_weights_from_disk)
    api_routes: tuple[str, ...] = ("/v1/models", "/v1/chat/completions", "/v1/completions")
    # None: it cannot serve model.adapters under their own model names (validate refuses them, saying why)
    lora: LoraSupport | None = None
    lora_refusal: str = ""  # why not, when lora is None

    @property
    def queue_metric(self) -> str | None:
        """The per-pod gauge of waiting requests autoscaling reads; None: none known."""
        return self.metrics.waiting if self.metrics else None
