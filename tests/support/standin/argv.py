"""The stand-in engine's command line: refuse what the real engine refuses, keep what serving needs.

The check is the engines' committed option snapshot (infra.engines.options: the real `vllm serve` parser's
options, TensorRT-LLM's click options). Until that module is importable a small built-in parser stands in.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.standin import adapters as lora

ENGINES = {"vllm": "vllm", "trtllm-serve": "tensorrt-llm", "sglang.launch_server": "sglang"}
OPTIONS_PY = Path(__file__).resolve().parents[3] / "infra" / "engines" / "options.py"
DEFAULT_VERSIONS = {"vllm": "0.33.0", "tensorrt-llm": "1.2.1", "sglang": "0.5.23"}
SNAPSHOT_PREFIX = {"vllm": "vllm-", "tensorrt-llm": "trtllm-", "sglang": "sglang-"}
# Without --host vLLM binds every interface; trtllm-serve's click default is "localhost"; SGLang's 127.0.0.1.
DEFAULT_HOSTS = {"vllm": "0.0.0.0", "tensorrt-llm": "127.0.0.1", "sglang": "127.0.0.1"}
DEFAULT_PORTS = {"sglang": 30000}  # arg_groups/fields/serving.py; the others default to 8000
# The running batch's bound without a flag: vLLM's max_num_seqs for an API server on a GPU under 70 GiB
# (EngineArgs._set_default_args), trtllm-serve's --max_batch_size click default; SGLang sizes its own from memory.
DEFAULT_BATCH = {"vllm": 256, "tensorrt-llm": 2048, "sglang": 256}


def served_name(engine: str, model: str) -> str:
    """The model id the engine lists without --served-model-name. vLLM: the model argument as given.
    trtllm-serve: a local folder's name, else the argument (tensorrt_llm/serve/openai_server.py,
    OpenAIServer.__init__: `self.model = model_dir.name` when `Path(model)` is a directory)."""
    if engine == "tensorrt-llm" and Path(model).is_dir():
        return Path(model).name
    return model


class Refused(Exception):
    """The engine would refuse this command line; message is what it prints, code its exit status."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class EngineArgs:
    """What the stand-in needs from an accepted command line."""

    engine: str  # "vllm" | "tensorrt-llm"
    version: str
    model: str
    host: str
    port: int
    served_model_names: tuple[str, ...]
    api_keys: tuple[str, ...]
    load_format: str
    max_model_len: int | None
    config_file: str | None = None  # TensorRT-LLM --config YAML
    world_size: int = 1  # GPUs the engine needs: tensor x pipeline parallel size
    backend: str = "pytorch"  # TensorRT-LLM --backend
    max_num_seqs: int = 256  # requests in the running batch at once; more wait (vLLM --max-num-seqs)
    metrics: bool = True  # /metrics is served (SGLang: only with --enable-metrics, http_server.py:314)
    adapters: tuple[tuple[str, str, str | None], ...] = ()  # LoRA (name, path, base model), standin/adapters.py


def _options():
    """infra/engines/options.py when present, else None.

    Loaded by path: it is stdlib-only, while its package's __init__ needs pydantic, which the hosts'
    system python lacks.
    """
    name = "inferry_engine_options"
    if name not in sys.modules:
        if not OPTIONS_PY.is_file():
            return None
        spec = importlib.util.spec_from_file_location(name, OPTIONS_PY)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def engine_version(engine: str) -> str:
    """The version the stand-in pretends to be: INFERRY_STANDIN_VERSION, else the newest snapshot."""
    if os.environ.get("INFERRY_STANDIN_VERSION"):
        return os.environ["INFERRY_STANDIN_VERSION"]
    options = _options()
    if options is not None:
        prefix = SNAPSHOT_PREFIX[engine]
        found = sorted((p.stem[len(prefix):] for p in options.SNAPSHOTS.glob(f"{prefix}*.json")),
                       key=lambda v: tuple(int(x) if x.isdigit() else 0 for x in v.split(".")))
        if found:
            return found[-1]
    return DEFAULT_VERSIONS[engine]


def _fallback_parser(engine: str) -> argparse.ArgumentParser:
    """A minimal strict parser of the flags targets use (only until the option snapshots are importable)."""
    class P(argparse.ArgumentParser):
        def error(self, message):
            raise Refused(message)

    if engine == "vllm":
        p = P(prog="vllm serve", add_help=False, allow_abbrev=False)
        p.add_argument("model_tag", nargs="?")
        for flag in ("--model", "--host", "--load-format", "--quantization", "--dtype", "--kv-cache-dtype",
                     "--download-dir", "--speculative-config", "--tokenizer", "--revision", "--chat-template",
                     "--generation-config", "--model-loader-extra-config", "--uvicorn-log-level"):
            p.add_argument(flag)
        for flag in ("--port", "--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size",
                     "--max-num-seqs", "--max-num-batched-tokens", "--block-size", "--seed", "--max-model-len"):
            p.add_argument(flag, type=int)
        p.add_argument("--gpu-memory-utilization", type=float)
        p.add_argument("--served-model-name", nargs="+")
        p.add_argument("--api-key", nargs="+")
        for flag in ("--enable-prefix-caching", "--no-enable-prefix-caching", "--enable-chunked-prefill",
                     "--no-enable-chunked-prefill", "--trust-remote-code", "--enforce-eager"):
            p.add_argument(flag, action="store_true")
        return p
    p = P(prog="trtllm-serve", add_help=False, allow_abbrev=False)
    p.add_argument("model")
    p.add_argument("--backend", choices=["pytorch", "tensorrt", "trt", "_autodeploy"])
    for flag in ("--host", "--tokenizer", "--config", "--log_level"):
        p.add_argument(flag, dest="extra_llm_api_options" if flag == "--config" else None)
    for flag in ("--port", "--tp_size", "--pp_size", "--max_batch_size", "--max_num_tokens", "--max_seq_len"):
        p.add_argument(flag, type=int)
    p.add_argument("--kv_cache_free_gpu_memory_fraction", type=float)
    p.add_argument("--trust_remote_code", action="store_true")
    return p


def _parse(engine: str, version: str, args: list[str]) -> argparse.Namespace:
    """Check args against the snapshot (or the fallback) and return the parsed namespace."""
    options = _options()
    if options is None:
        return _fallback_parser(engine).parse_args(args)
    problems = options.check_args(engine, version, args)
    if problems:
        # A name vLLM checks after parsing (a config class's Literal) fails with a traceback: exit 1, not 2.
        late = all(getattr(options, "NOT_A_VALUE", "\0") in p for p in problems)
        raise Refused("; ".join(problems), 1 if late else 2)
    return options.parser(engine, version).parse_args(args)


def parse(program: str, argv: list[str]) -> EngineArgs:
    """Parse `vllm serve MODEL ...` / `trtllm-serve MODEL ...` (program, then argv after it)."""
    engine = ENGINES[program]
    version = engine_version(engine)
    if engine == "vllm":
        if not argv or argv[0] != "serve":
            raise Refused(f"invalid choice: {argv[0] if argv else ''!r} (the stand-in knows only 'serve')")
        argv = argv[1:]
    elif engine == "sglang":
        argv = sglang_config(argv, version)
    elif argv and argv[0] == "serve":
        argv = argv[1:]
    ns = _parse(engine, version, argv)
    model = getattr(ns, "model_tag", None) or getattr(ns, "model", None) or getattr(ns, "model_path", None)
    if not model:
        raise Refused("the following arguments are required: model_tag" if engine == "vllm"
                      else "Missing argument 'MODEL'.")
    env_key = os.environ.get("VLLM_API_KEY") if engine == "vllm" else None
    keys = getattr(ns, "api_key", None) or ([env_key] if env_key else [])
    keys = (keys,) if isinstance(keys, str) else tuple(keys)
    names = getattr(ns, "served_model_name", None) or [served_name(engine, model)]
    return EngineArgs(
        engine=engine, version=version, model=model, host=getattr(ns, "host", None) or DEFAULT_HOSTS[engine],
        port=getattr(ns, "port", None) or DEFAULT_PORTS.get(engine, 8000),
        served_model_names=(names,) if isinstance(names, str) else tuple(names),
        api_keys=keys, load_format=getattr(ns, "load_format", None) or "auto",
        max_model_len=getattr(ns, "max_model_len", None) or getattr(ns, "max_seq_len", None)
        or getattr(ns, "context_length", None),
        config_file=getattr(ns, "extra_llm_api_options", None),
        world_size=(_size(ns, "tensor_parallel_size") * _size(ns, "pipeline_parallel_size")
                    * _size(ns, "tp_size") * _size(ns, "pp_size") * _size(ns, "dp_size")),
        backend=getattr(ns, "backend", None) or "pytorch",
        max_num_seqs=getattr(ns, "max_num_seqs", None) or getattr(ns, "max_batch_size", None)
        or getattr(ns, "max_running_requests", None) or DEFAULT_BATCH[engine],
        metrics=engine != "sglang" or bool(getattr(ns, "enable_metrics", False)),
        adapters=lora.adapters(engine, ns))


def _sglang_merger(version: str):
    """SGLang's own ConfigArgumentMerger class (tests/support/engine_code.py fetched it from the pinned wheel):
    beside the stand-in on a test host, else from the checkout's cache."""
    here = Path(__file__).resolve().parent / "engine_code" / f"sglang-{version}"
    if not here.is_dir():
        from tests.support import engine_code  # in the checkout only: the hosts get the copy above

        here = engine_code.folder("sglang", version)
    name = f"sglang_config_parser_{version.replace('.', '_')}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, here / "sglang_config_parser.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name].ConfigArgumentMerger


def sglang_config(argv: list[str], version: str) -> list[str]:
    """argv with SGLang's --config YAML merged in, by SGLang's own merger over the snapshot's parser, as
    prepare_server_args does (sglang/srt/server_args.py:683): its refusals (a name not ending in .yaml/.yml,
    a missing file, two --config) are SGLang's."""
    if "--config" not in argv:
        return argv
    try:
        return _sglang_merger(version)(_options().parser("sglang", version)).merge_config_with_args(argv)
    except (ValueError, OSError) as e:  # launch_server dies with the traceback's last line: exit 1
        raise Refused(f"{type(e).__name__}: {e}", code=1) from None


def _size(ns: argparse.Namespace, dest: str) -> int:
    """A parallel size from the parsed flags (1 when absent)."""
    return getattr(ns, dest, None) or 1


def check_model(args: EngineArgs) -> None:
    """Refuse a model the engine could not load: a local folder without config.json, or S3 without streaming."""
    if args.model.startswith("s3://"):
        # vLLM streams s3:// models with the Run:ai streamer (load format runai_streamer; `auto` picks it).
        if args.engine != "vllm" or args.load_format not in ("runai_streamer", "auto"):
            raise Refused(f"cannot load {args.model} with load format {args.load_format!r}: "
                          "s3:// models need --load-format runai_streamer", code=1)
        return
    path = Path(args.model)
    if not path.is_dir():
        raise Refused(f"Invalid repository ID or local directory specified: '{args.model}'. "
                      "(no network: only local model folders load)", code=1)
    if not (path / "config.json").is_file():
        raise Refused(f"Invalid model folder '{args.model}': no config.json in it", code=1)
    if args.config_file:
        check_config(args)
    problem = lora.missing(args.adapters)
    if problem:
        raise Refused(problem, code=1)


def check_config(args: EngineArgs) -> None:
    """TensorRT-LLM's --config YAML: it must exist and hold only keys its LLM API models accept."""
    path = Path(args.config_file)
    if not path.is_file():
        raise Refused(f"--config file not found: {args.config_file}", code=1)
    import yaml  # the hosts' system python3 has it (python3-yaml, scripts/setup.sh --test)

    config = yaml.safe_load(path.read_text()) or {}
    options = _options()
    problems = options.check_yaml(args.version, config, args.backend) if options else []
    if problems:
        raise Refused(f"{len(problems)} validation errors for TorchLlmArgs: " + "; ".join(problems), code=1)


def refuse(program: str, error: Refused) -> None:
    """Print the refusal the way the engine's CLI does (argparse / click style) and exit."""
    if error.code == 2:
        usage = {"vllm": "usage: vllm serve [model_tag] [options]",
                 "sglang.launch_server": "usage: sglang serve [-h] --model-path MODEL_PATH [options]"}.get(
            program, "Usage: trtllm-serve [OPTIONS] MODEL\nTry 'trtllm-serve --help' for help.\n")
        prefix = {"vllm": "vllm serve: error: ", "sglang.launch_server": "sglang serve: error: "}.get(program, "Error: ")
        sys.stderr.write(f"{usage}\n{prefix}{error}\n")
    else:
        sys.stderr.write(f"ERROR {error}\n")
    sys.exit(error.code)
