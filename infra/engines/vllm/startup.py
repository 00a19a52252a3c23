"""What `vllm serve` refuses after its parser accepted the command line, mirrored at `inferry validate`:
serve-args checks, scheduler limits, parser names, and extra args that fight what inferry sets.
Each rule's source (vLLM v0.33.0 file and function) is listed in docs/engines.md."""
from __future__ import annotations

import argparse
import difflib
import json

from infra.stack.config import Deployment, VllmEngine
from infra.engines import options
from infra.engines.vllm import scheduler as vllm_scheduler
from infra.engines.vllm import service as vllm
from infra.errors import Problem

EXTRA = "engine.extra_args"
_REPLICAS = "run more replicas instead (more target.hosts, or target.scaling on Kubernetes)"
# Options inferry sets itself, by argparse dest: (the stack field to use instead, why).
OWNED = {
    "model": ("model.weights", "inferry passes the weights' path as the model"),
    "served_model_name": ("model.name", "inferry serves the model under model.name and its health gate waits for it"),
    "host": ("target", "the target decides where the engine listens"),
    "port": ("serving.port", "the load balancer and health gate use serving.port"),
    "uds": ("serving.port", "a Unix socket leaves serving.port unanswered"),
    "headless": ("serving.port", "a headless engine serves no API on serving.port"),
    "api_key": ("serving.api_key", "a key on the command line is visible to every process on the host; "
                "inferry hands serving.api_key to vLLM through VLLM_API_KEY"),
    "tensor_parallel_size": ("engine.tensor_parallel_size", "the GPU reservation follows it"),
    "pipeline_parallel_size": ("engine.pipeline_parallel_size", "the GPU reservation follows it"),
    "data_parallel_size": (EXTRA, "inferry reserves the GPUs of one engine per replica"),
    "data_parallel_size_local": (EXTRA, "inferry reserves the GPUs of one engine per replica"),
}
# (option, dict option, key): vLLM refuses both at once (EngineArgs.create_engine_config).
EXCLUSIVE = [("attention_backend", "attention_config", "backend"),
             ("cudagraph_capture_sizes", "compilation_config", "cudagraph_capture_sizes"),
             ("max_cudagraph_capture_size", "compilation_config", "max_cudagraph_capture_size"),
             ("enable_flashinfer_autotune", "kernel_config", "enable_flashinfer_autotune")]


def flag(dest: str) -> str:
    """The option's canonical flag text."""
    return "--" + dest.replace("_", "-")


def typed_fields(version: str) -> dict[str, str]:
    """argparse dest -> the stack field that renders it (vllm.FLAGS)."""
    actions = options.parser("vllm", version)._option_string_actions
    fields = {actions[f.flag].dest: f"engine.{actions[f.flag].dest}" for f in vllm.FLAGS}
    fields.update({d: OWNED[d][0] for d in fields if d in OWNED} | {"speculative_config": "engine.speculative"})
    return fields


def extra_dests(version: str, extra: list[str]) -> set[str]:
    """The dests extra_args set (compared with parsing the model alone)."""
    base = vars(options.parse("vllm", version, ["m"]))
    got = vars(options.parse("vllm", version, ["m", *extra]))
    return {k for k, v in got.items() if v != base.get(k)}


def owned_problems(version: str, from_extra: set[str]) -> list[Problem]:
    """Extra args that set what inferry sets (a typed field or an owned option)."""
    fields = typed_fields(version)
    problems = []
    for dest in sorted(from_extra & (set(OWNED) | set(fields))):
        field, why = OWNED.get(dest, (fields.get(dest), f"{fields.get(dest)} is the stack's field for it; "
                                      "sizing reads the field, and the later flag would silently win"))
        fix = (_REPLICAS if field == EXTRA else f"remove {flag(dest)} and set {field}") \
            if dest != "host" else f"remove {flag(dest)}"
        problems.append(Problem(EXTRA, f"{flag(dest)} is set by inferry ({why})", hint=fix))
    return problems


def _dict(value) -> dict:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return {}
    return value if isinstance(value, dict) else {}


def dependent_problems(ns: argparse.Namespace) -> list[Problem]:
    """Pairs validate_parsed_serve_args and create_engine_config refuse (all come from extra args)."""
    pairs = [("enable_auto_tool_choice", "tool_call_parser"), ("enable_log_outputs", "enable_log_requests")]
    problems = [Problem(EXTRA, f"{flag(a)} needs {flag(b)}: vLLM refuses to start without it",
                        hint=f"add {flag(b)}" + (" NAME" if b == "tool_call_parser" else "") + f" or drop {flag(a)}")
                for a, b in pairs if getattr(ns, a) and not _value(getattr(ns, b))]
    if getattr(ns, "enable_per_request_metrics", None) and ns.disable_log_stats:
        problems.append(Problem(EXTRA, "--enable-per-request-metrics needs engine statistics, which "
                                "--disable-log-stats turns off: vLLM refuses to start", hint="drop one of the two"))
    if (getattr(ns, "sse_keep_alive_interval", None) or 0) < 0:
        problems.append(Problem(EXTRA, "--sse-keep-alive-interval must be 0 (off) or positive",
                                str(ns.sse_keep_alive_interval), hint="use 0 or a positive number of seconds"))
    if getattr(ns, "grpc_port", None) is not None:
        problems.append(Problem(EXTRA, "--grpc-port needs VLLM_USE_RUST_FRONTEND=1, which inferry does not set: "
                                "vLLM refuses to start", hint="remove --grpc-port"))
    for single, group, key in EXCLUSIVE:
        if getattr(ns, single, None) is not None and key in _dict(getattr(ns, group, None)):
            problems.append(Problem(EXTRA, f"{flag(single)} and {flag(group)}.{key} are mutually exclusive: "
                                    "vLLM refuses to start", hint="keep only one of them"))
    return problems


def _value(v):
    return None if v in ("", "None") else v


def closest(name: str, names: list[str]) -> str | None:
    """The registered name closest to name ('-' and '_' alike, any case), or None."""
    norm = name.replace("-", "_").lower()
    close = [n for n in names if n.replace("-", "_").lower() == norm] or difflib.get_close_matches(name, names, 1)
    return close[0] if close else None


def parser_name_problems(ns: argparse.Namespace, values: dict) -> list[Problem]:
    """Tool-call and reasoning parser names must be registered (validate_api_server_args)."""
    problems = []
    tool = _value(ns.tool_call_parser)
    if tool and ns.enable_auto_tool_choice and not ns.tool_parser_plugin and tool not in values["tool_call_parser"]:
        problems.append(_unregistered("--tool-call-parser", tool, values["tool_call_parser"]))
    reasoning = _value(ns.reasoning_parser)
    if reasoning and reasoning.lower() != "none" and not ns.reasoning_parser_plugin \
            and reasoning not in values["reasoning_parser"]:
        problems.append(_unregistered("--reasoning-parser", reasoning, values["reasoning_parser"]))
    return problems


def _unregistered(option: str, name: str, names: list[str]) -> Problem:
    close = closest(name, names)
    return Problem(EXTRA, f"{option} {name!r} is not registered in this vLLM: it refuses to start"
                   + (f" (did you mean {close}?)" if close else ""),
                   hint=f"use {option} {close}" if close else "use one of " + ", ".join(names))


def startup_problems(d: Deployment, model_max: int | None) -> list[Problem]:
    """Every start-up refusal for a vLLM stack whose command line the parser accepts."""
    from infra.engines.vllm.service import service_spec  # its own engine's, not the registry's (no import circle)

    e = d.engine
    assert isinstance(e, VllmEngine)
    spec = service_spec(d)
    if options.check_args("vllm", e.version, spec.args):
        return []  # the parser already refuses it: option_rule says why
    try:
        ns = options.parse("vllm", e.version, spec.args)
        from_extra = extra_dests(e.version, e.extra_args)
    except options.OptionError:  # check_args accepted it, so this does not happen; never a traceback though
        return []
    owned = owned_problems(e.version, from_extra)
    if owned:
        return owned  # the rest would judge values inferry will not run
    fields = typed_fields(e.version)
    problems = dependent_problems(ns)
    problems += parser_name_problems(ns, options.snapshot("vllm", e.version)["values"])
    batch = vllm_scheduler.effective(ns, model_max, vllm_scheduler.gpu_defaults(d.provider.gpu))
    if batch is not None:
        def where(dest: str) -> str:
            return EXTRA if dest in from_extra else fields.get(dest, EXTRA)

        problems += vllm_scheduler.scheduler_problems(ns, batch, where)
    problems += [Problem(EXTRA, f"{short} is an abbreviation of {full}", severity="warning",
                         hint=f"write {full}: a later vLLM may add an option that makes {short} ambiguous")
                 for short, full in options.abbreviations("vllm", e.version, e.extra_args)]
    return problems
