"""What `python3 -m sglang.launch_server` refuses after its parser accepted the command line, at validate time:
extra args that fight what inferry sets, and the checks of server_args resolution that need no model.

Each rule cites the sglang 0.5.23 source it mirrors (file:line under the wheel's sglang/srt/)."""
from __future__ import annotations

import argparse

from infra.engines import options
from infra.engines.sglang import service
from infra.errors import Problem
from infra.stack.config import Deployment

EXTRA = "engine.extra_args"
# Options inferry sets itself, by argparse dest: (the stack field to use instead, why).
OWNED = {
    "model_path": ("model.weights", "inferry passes the weights' path as the model"),
    "served_model_name": ("model.name", "the health gate and clients use model.name"),
    "host": ("target", "the target decides where the engine listens"),
    "port": ("serving.port", "the load balancer and health gate use serving.port"),
    "api_key": ("serving.api_key", "a key on the command line is visible to every process on the host"),
    "config": ("serving.api_key", "inferry's launch wrapper passes the one --config SGLang accepts"),
    "enable_metrics": ("engine", "inferry always turns it on: status, drain and autoscaling read /metrics"),
}
# Attention backends that change the page size when it is not one they support
# (arg_groups/overrides.py:1143 _mla_backend_page_constraints): backend -> (pages it keeps, what it picks).
BACKEND_PAGES = {"flashmla": ((64,), 64), "trtllm_mla": ((32, 64), 64), "cutedsl_mla": ((32, 64), 64),
                 "trtllm_mha": ((16, 32, 64, 128), 64), "hpc_ops": ((64,), 64)}


def flag(dest: str) -> str:
    """The option's canonical flag text."""
    return "--" + dest.replace("_", "-")


def typed_fields(version: str) -> dict[str, str]:
    """argparse dest -> the stack field that renders it (service.FLAGS and the speculative flags)."""
    actions = options.parser("sglang", version)._option_string_actions
    fields = {actions[f.flag].dest: f"engine.{f.flag[2:].replace('-', '_')}" for f in service.FLAGS}
    fields.update({"tp_size": "engine.tensor_parallel_size", "pp_size": "engine.pipeline_parallel_size",
                   "dp_size": "engine.data_parallel_size", "context_length": "engine.max_model_len"})
    fields.update({actions[f].dest: "engine.speculative" for f in service.SPECULATIVE_FLAGS})
    return {d: f for d, f in fields.items() if d not in OWNED}


def extra_dests(version: str, extra: list[str]) -> set[str]:
    """The dests extra_args set (compared with parsing the model alone)."""
    base = vars(options.parse("sglang", version, ["--model-path", "m"]))
    got = vars(options.parse("sglang", version, ["--model-path", "m", *extra]))
    return {k for k, v in got.items() if v != base.get(k)}


def owned_problems(version: str, from_extra: set[str]) -> list[Problem]:
    """Extra args that set what inferry sets: an owned option, or one a typed field renders (sizing reads the
    field; SGLang's argparse lets the later flag win, so the field would be silently overridden)."""
    fields = typed_fields(version)
    problems = []
    for dest in sorted(from_extra & (set(OWNED) | set(fields))):
        field, why = OWNED.get(dest, (fields.get(dest), f"{fields.get(dest)} is the stack's field for it; "
                                      "sizing reads the field, and the later flag would silently win"))
        fix = f"remove {flag(dest)}" + ("" if field in ("target", "engine") else f" and set {field}")
        problems.append(Problem(EXTRA, f"{flag(dest)} is set by inferry ({why})", hint=fix))
    return problems


def page_size(ns: argparse.Namespace) -> int:
    """Tokens per KV page as resolution leaves it: --page-size, else 1 on CUDA (overrides.py:1339
    _page_size_default), changed by an attention backend that needs other pages (BACKEND_PAGES)."""
    page = ns.page_size or 1
    for backend in {ns.attention_backend, ns.decode_attention_backend, ns.prefill_attention_backend}:
        keeps, picks = BACKEND_PAGES.get(backend, ((page,), page))
        page = page if page in keeps else picks
    return page


def resolved_problems(d: Deployment, ns: argparse.Namespace) -> list[Problem]:
    """The checks of arg_groups/validation_hook.py check_server_args that hold for any model."""
    problems = []
    e = d.engine
    # validation_hook.py:117 check_pipeline_parallel_compat: with pp_size > 1 only EAGLE, and only on a PD
    # prefill node or with SGLANG_ENABLE_PP_SPEC (neither of which inferry sets up).
    pp = ns.pp_size or 1  # the snapshot's parser keeps no defaults: unset is SGLang's default
    if pp > 1 and ns.speculative_algorithm is not None:
        problems.append(Problem("engine.speculative", f"SGLang refuses speculative decoding "
                                f"({ns.speculative_algorithm}) with pipeline parallelism (pp_size {pp}): "
                                "it supports it only on disaggregated prefill nodes",
                                hint="drop engine.speculative or set engine.pipeline_parallel_size to 1"))
    # validation_hook.py:241: a prefill chunk must be a whole number of KV pages.
    page = page_size(ns)
    chunk = ns.chunked_prefill_size
    if chunk is not None and chunk > 0 and chunk % page:
        where = "engine.chunked_prefill_size" if e.chunked_prefill_size is not None else EXTRA
        problems.append(Problem(where, f"{chunk} is not a multiple of the KV page size {page}: SGLang refuses "
                                "to start (chunked_prefill_size must be divisible by page_size)",
                                hint=f"use {max(page, chunk // page * page)} or another multiple of {page}"))
    return problems


def deprecated_problems(version: str, extra: list[str]) -> list[Problem]:
    """A warning for each deprecated spelling in extra_args, with what SGLang says to write instead."""
    deprecated = {f: o.get("new_flag") for o in options.snapshot("sglang", version)["options"]
                  if o.get("deprecated") for f in o["flags"]}
    return [Problem(EXTRA, f"{a.split('=', 1)[0]} is deprecated in SGLang {version}", severity="warning",
                    hint=f"write {deprecated[a.split('=', 1)[0]]} instead" if deprecated[a.split('=', 1)[0]]
                    else "drop it: a later SGLang removes it")
            for a in extra if a.split("=", 1)[0] in deprecated]
