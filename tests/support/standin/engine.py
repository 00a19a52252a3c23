"""Stand-in GPU engine: `vllm serve MODEL ...` / `trtllm-serve MODEL ...` / `python3 -m sglang.launch_server
--model-path MODEL ...` with the real command line, no GPU.

Usage: engine.py PROGRAM ARGS... (PROGRAM is vllm, trtllm-serve or sglang.launch_server; test hosts install the
first two under those names and a python3 that hands `-m sglang.launch_server` to it).
Refuses what the engine's option snapshot refuses (exit 2, argparse/click message), refuses a model it could
not load (exit 1), then serves vLLM's OpenAI API (see server.py) and logs to stdout like the engine.
Knobs, from the environment or from /etc/inferry-standin.env on a test host (KEY=VALUE lines; TestHost.
set_standin writes it; the environment wins): INFERRY_STANDIN_STARTUP_S=seconds before serving (the port is
bound at once, as vLLM does); INFERRY_STANDIN_NEVER_HEALTHY=1 (serves, /health 503 forever, logs an error);
INFERRY_STANDIN_CRASH=message (logs it as an error after start-up and exits 1); INFERRY_STANDIN_VERSION;
INFERRY_STANDIN_GPU_COUNT (the host's GPUs: more tensor x pipeline parallel ranks than that fail like vLLM);
INFERRY_STANDIN_TOKEN_S=seconds per generated token (decode time: a request stays running that long).
A model folder may carry knobs too, in MODEL/inferry-standin.env (same lines, below both): how a test gives an
engine in a pod its knobs, through the weights it fetches.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

if not __package__:  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.support.standin.argv import ENGINES, Refused, check_model, engine_version, parse, refuse  # noqa: E402
from tests.support.standin.server import State, make_server  # noqa: E402


KNOBS_FILE = Path("/etc/inferry-standin.env")
MODEL_KNOBS = "inferry-standin.env"
# One line per start: tests count restarts. In the container image, /dev/shm (tests/support/hosts/image.py).
STARTS_LOG = Path(os.environ.get("INFERRY_STANDIN_STARTS") or "/var/log/inferry-standin/starts.jsonl")


def load_knobs(path: Path = KNOBS_FILE) -> None:
    """Merge a knob file (the host's, the model's) into os.environ (variables already set win)."""
    if not path.is_file():
        return
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip().startswith("INFERRY_STANDIN_"):
            os.environ.setdefault(key.strip(), value.strip())


def record_start(program: str, argv: list[str]) -> None:
    """Append this start to STARTS_LOG when INFERRY_STANDIN_RECORD=1 (set on test hosts by their knob file)."""
    if os.environ.get("INFERRY_STANDIN_RECORD") != "1":
        return
    try:
        STARTS_LOG.parent.mkdir(parents=True, exist_ok=True)
        with STARTS_LOG.open("a") as f:
            f.write(json.dumps({"time": time.time(), "pid": os.getpid(), "argv": [program, *argv]}) + "\n")
    except OSError:
        pass


def log(message: str, level: str = "INFO", source: str = "api_server.py", prefix: str | None = None) -> None:
    """One engine log line on stdout, vLLM's format: 'INFO 11-30 01:02:03 [file.py] message'."""
    head = prefix if prefix is not None else f"{level} {time.strftime('%m-%d %H:%M:%S')} [{source}] "
    print(f"{head}{message}", flush=True)


def accepted(program: str, argv: list[str]):
    """The parsed command line, or exit as the engine would (bad flags, unloadable model, too few GPUs)."""
    try:
        args = parse(program, argv)
        check_model(args)
    except Refused as e:
        refuse(program, e)
    gpus = int(os.environ.get("INFERRY_STANDIN_GPU_COUNT") or 0)
    if gpus and args.world_size > gpus:
        log(f"ValueError: The number of required GPUs ({args.world_size}) exceeds the total number of available "
            f"GPUs ({gpus}) in the placement group.", level="ERROR", source="core.py")
        sys.exit(1)
    return args


def load_model(state: State) -> None:
    """'Load' the model: the start-up delay and the crash / never-healthy faults."""
    log(f"Loading weights from {state.args.model}", source="default_loader.py")
    time.sleep(float(os.environ.get("INFERRY_STANDIN_STARTUP_S") or 0))
    if os.environ.get("INFERRY_STANDIN_CRASH"):
        log(f"EngineCore failed to start: {os.environ['INFERRY_STANDIN_CRASH']}", level="ERROR", source="core.py")
        sys.exit(1)
    if os.environ.get("INFERRY_STANDIN_NEVER_HEALTHY"):
        log("EngineCore encountered a fatal error: engine never became ready (INFERRY_STANDIN_NEVER_HEALTHY)",
            level="ERROR", source="core.py")
    else:
        state.healthy = True


def serve(program: str, argv: list[str]) -> None:
    """Check the command line, bind, 'load' the model, serve until SIGTERM."""
    args = accepted(program, argv)
    load_knobs(Path(args.model) / MODEL_KNOBS)
    record_start(program, argv)
    name = {"vllm": "vLLM", "sglang": "SGLang"}.get(args.engine, "TensorRT-LLM")
    log(f"{name} API server version {args.version}")
    log(f"args: {json.dumps(argv[1:] if argv[:1] == ['serve'] else argv)}")
    state = State(args, log)
    try:
        server = make_server(state)
    except OSError as e:
        log(f"[Errno {e.errno}] error while attempting to bind on address ({args.host!r}, {args.port}): "
            f"{e.strerror}", level="ERROR")
        sys.exit(1)
    signal.signal(signal.SIGTERM, lambda *_: (log("Shutting down"), os._exit(0)))
    load_model(state)
    log(f"Starting {name} API server 0 on http://{args.host}:{args.port}")
    log("Application startup complete.", prefix="INFO:     ")
    server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    """Entry point: engine.py PROGRAM ARGS..."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ENGINES:
        sys.exit(f"usage: engine.py {{{'|'.join(ENGINES)}}} ARGS...")
    program, rest = argv[0], argv[1:]
    load_knobs()
    if rest in (["--version"], ["-v"]):
        print(engine_version(ENGINES[program]))
        return
    serve(program, rest)


if __name__ == "__main__":
    main()
