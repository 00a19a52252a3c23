"""ServiceSpec: what an engine needs to run, the one type that crosses from engines to targets."""
from __future__ import annotations

from dataclasses import dataclass, field

from infra.stack.config import SecretRef

# Where targets make the weights visible to the engine (container path; a target may pass another).
MODELS_DIR = "/models"
# The auth proxy in front of an engine that cannot check API keys itself (SSH compose and Kubernetes).
PROXY_IMAGE = "nginx:1.27-alpine"


@dataclass(frozen=True)
class EnvVar:
    """One environment variable: a plain value, or a secret by reference (never its value)."""

    name: str
    value: str | None = None
    secret: SecretRef | None = None
    secret_field: str | None = None  # the stack field the secret belongs to, e.g. "serving.api_key"

    def __post_init__(self) -> None:
        if (self.value is None) == (self.secret is None):
            raise ValueError(f"env {self.name}: give exactly one of value or secret")


@dataclass(frozen=True)
class SpecFile:
    """A file the engine reads, written by the target next to the service (e.g. the TRT-LLM YAML)."""

    name: str  # file name inside the service's config folder
    content: str
    mount_path: str  # where the engine sees it (container path); args refer to this path
    mode: int = 0o644


@dataclass(frozen=True)
class BuildStep:
    """A one-off job before serving (TensorRT engine build): run, then upload the output to the store."""

    image: str
    script: str  # a POSIX shell script, values already quoted
    cache_key: str  # (model, weights digest, GPU arch, engine version, options) -> store prefix
    output_dir: str  # where the script leaves the built engine (container path)


@dataclass(frozen=True)
class ServiceSpec:
    """Everything a target needs to run an engine: image, command line, env, files, port, health."""

    engine: str  # the engine's kind (infra/engines/registry.py)
    version: str
    image: str
    command: tuple[str, ...]  # the executable and subcommand, e.g. ("vllm", "serve")
    args: tuple[str, ...]  # every flag, computed in infra/engines; never edited by targets
    env: tuple[EnvVar, ...] = ()
    files: tuple[SpecFile, ...] = ()
    port: int = 8000
    health_path: str = "/health"
    models_path: str = "/v1/models"
    metrics_path: str = "/metrics"
    gpus: int = 1
    served_model_name: str = ""
    model_dir: str = MODELS_DIR  # where the engine reads weights (or an s3:// URL when streaming)
    streams_weights: bool = False  # True: the engine reads S3 itself; the target fetches nothing
    build: BuildStep | None = None
    # The engine cannot check an API key itself (TensorRT-LLM): the target must put an authenticating
    # proxy on `port` that forwards to the engine on 127.0.0.1:`engine_port`.
    needs_auth_proxy: bool = False
    engine_port: int | None = None  # where the engine listens when a proxy fronts it; None: `port`
    # Behind a gateway: the one address the engine (or its proxy) listens on, and no client key ("" = neither).
    bind: str = ""
    # More weights the engine reads besides the model (e.g. a speculative draft): (s3:// source, engine path).
    extra_weights: tuple[tuple[str, str], ...] = ()
    shm_size: str = "16g"  # NCCL / PyTorch shared memory for tensor parallelism
    # The CUDA release the image is built on: the host driver must support it (SSH preflight); "" unknown.
    cuda_requirement: str = ""
    queue_metric: str | None = None  # the engine's per-pod queue gauge for autoscaling; None: none known
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def argv(self) -> tuple[str, ...]:
        """The full command line: command then args."""
        return self.command + self.args

    @property
    def listen_port(self) -> int:
        """The port the engine process itself binds."""
        return self.engine_port if self.engine_port is not None else self.port

    def secret_env(self) -> tuple[EnvVar, ...]:
        """The env vars whose values are secrets."""
        return tuple(e for e in self.env if e.secret is not None)
