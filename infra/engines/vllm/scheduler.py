"""vLLM's scheduler limits, checked before it loads weights: SchedulerConfig.verify_max_model_len with the
defaults EngineArgs fills in for `vllm serve` (vllm/engine/arg_utils.py, vllm/config/scheduler.py, v0.33.0)."""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from infra.errors import Problem

GIB = 2**30


@dataclass(frozen=True)
class Batch:
    """The scheduler's limits as vLLM will run them, and whether the stack set each."""

    max_model_len: int | None
    chunked_prefill: bool
    max_num_batched_tokens: int
    max_num_seqs: int
    tokens_set: bool
    seqs_set: bool


def batch_defaults(memory_bytes: int, device_name: str, capability: str) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) for `vllm serve` on a GPU: EngineArgs.get_batch_defaults,
    usage context OPENAI_API_SERVER."""
    if memory_bytes >= 160 * GIB:  # B200/B300 class
        return 16384, 1024
    # "a100" stays on the small tier (vLLM PR #17885), as does GB10 (compute capability 12.1).
    if memory_bytes >= 70 * GIB and "a100" not in device_name.lower() and capability != "12.1":
        return 8192, 1024
    return 2048, 256


def gpu_defaults(gpu: object) -> tuple[int, int] | None:
    """batch_defaults for provider.gpu (a catalog key or a declared GPU), or None when it is unknown."""
    try:
        from infra.sizing.catalog import resolve_gpu

        g = resolve_gpu(gpu)
    except Exception:  # noqa: BLE001 - unknown GPU: the defaults (and the rules needing them) are unknown
        return None
    return batch_defaults(g.memory_bytes, g.product_names[0], g.compute_capability)


def effective(ns: argparse.Namespace, model_max: int | None, defaults: tuple[int, int] | None) -> Batch | None:
    """The limits after EngineArgs._set_default_max_num_seqs_and_batched_tokens_args; None when unknown."""
    mml = ns.max_model_len if ns.max_model_len not in (None, -1) else model_max
    # Generative decoder models support chunked prefill, so vLLM turns it on unless told otherwise
    # (ModelConfig.is_chunked_prefill_supported; _set_default_chunked_prefill_and_prefix_caching_args).
    chunked = ns.enable_chunked_prefill is not False
    tokens, seqs = ns.max_num_batched_tokens, ns.max_num_seqs
    if (tokens is None or seqs is None) and defaults is None:
        return None
    if tokens is None and mml is None:
        return None
    scale = 2 if ns.performance_mode == "throughput" else 1  # throughput mode doubles unset defaults
    mbt = tokens if tokens is not None else defaults[0] * scale
    mns = seqs if seqs is not None else defaults[1] * scale
    if tokens is None:
        mbt = min(mns * mml, mbt if chunked else max(mml, mbt))
    if seqs is None:
        mns = min(mns, mbt)
    return Batch(mml, chunked, mbt, mns, tokens is not None, seqs is not None)


def scheduler_problems(ns: argparse.Namespace, b: Batch, where) -> list[Problem]:
    """What SchedulerConfig.verify_max_model_len and create_engine_config refuse; `where(dest)` names the
    stack field that set an option."""
    problems = []
    mbt, mns, mml = b.max_num_batched_tokens, b.max_num_seqs, b.max_model_len
    if mml is not None and mbt < mml and not b.chunked_prefill:
        problems.append(Problem(where("max_num_batched_tokens"), f"{mbt} is below max_model_len ({mml}) with "
                                "chunked prefill off: vLLM refuses to start (SchedulerConfig.verify_max_model_len)",
                                hint=f"raise max_num_batched_tokens to {mml} or more, lower max_model_len to {mbt}, "
                                "or leave chunked prefill on"))
    if mbt < mns:
        dest = "max_num_batched_tokens" if b.tokens_set else "max_num_seqs"
        note = "" if b.tokens_set else f" (vLLM's default max_num_batched_tokens here is {mbt})"
        problems.append(Problem(where(dest), f"max_num_batched_tokens ({mbt}) is below max_num_seqs ({mns}){note}: "
                                "vLLM refuses to start (SchedulerConfig.verify_max_model_len)",
                                hint=f"set max_num_batched_tokens to {mns} or more, or max_num_seqs to {mbt} or less"))
    active = getattr(ns, "max_num_active_seqs", None)
    if active is not None and active > mns:
        problems.append(Problem(where("max_num_active_seqs"), f"--max-num-active-seqs ({active}) is above "
                                f"max_num_seqs ({mns}): vLLM refuses to start",
                                hint=f"use {mns} or less, or raise max_num_seqs"))
    threshold = getattr(ns, "long_prefill_token_threshold", None)
    if threshold is not None and mml is not None and threshold > mml:
        problems.append(Problem(where("long_prefill_token_threshold"), f"--long-prefill-token-threshold "
                                f"({threshold}) is above max_model_len ({mml}): vLLM refuses to start",
                                hint=f"use {mml} or less"))
    return problems + _lora_spec_problem(ns, mbt, mns, where)


def _lora_spec_problem(ns: argparse.Namespace, mbt: int, mns: int, where) -> list[Problem]:
    # EngineArgs.create_engine_config: LoRA with speculative decoding needs room for every draft token.
    if not getattr(ns, "enable_lora", None) or not ns.speculative_config:
        return []
    k = json.loads(ns.speculative_config).get("num_speculative_tokens") if isinstance(
        ns.speculative_config, str) else ns.speculative_config.get("num_speculative_tokens")
    if not isinstance(k, int) or mbt >= mns * (k + 1):
        return []
    return [Problem(where("max_num_batched_tokens"), f"with LoRA and {k} speculative tokens vLLM needs "
                    f"max_num_batched_tokens >= max_num_seqs x {k + 1} = {mns * (k + 1)} (found {mbt})",
                    hint=f"raise max_num_batched_tokens to {mns * (k + 1)}, lower max_num_seqs, or draft fewer tokens")]
