"""SGLang's `inferry validate` rules: the command line against the pinned parser, then what start-up refuses.

Each start-up rule cites the sglang 0.5.23 source it mirrors (file:line in the wheel's sglang/srt/)."""
from __future__ import annotations

from infra.engines import options, rules
from infra.engines.sglang import service, startup
from infra.errors import Problem
from infra.stack.config import Deployment

EXTRA = "engine.extra_args"


def option_problems(d: Deployment) -> list[Problem]:
    """Every rendered flag, extra_args included, exists in the pinned version's parser (did-you-mean)."""
    spec = service.service_spec(d)
    return rules.snapshot_problems(spec) or rules.argv_problems(spec, EXTRA)


def startup_rules(d: Deployment, model_max: int | None) -> list[Problem]:
    """What launch_server refuses once its parser accepted the line (nothing when the parser refuses it)."""
    spec = service.service_spec(d)
    if options.check_args("sglang", d.engine.version, spec.args):
        return []  # option_problems says why
    e = d.engine
    problems = startup.owned_problems(e.version, startup.extra_dests(e.version, e.extra_args))
    if problems:
        return problems  # the rest would judge values inferry will not run
    problems = startup.resolved_problems(d, options.parse("sglang", e.version, spec.args))
    gpus = d.provider.gpu_count
    # arg_groups/validation_hook.py / server_args.py:581 compute_world_size: dp x tp x pp GPUs per node;
    # the scheduler places one rank per visible GPU and fails when there are fewer.
    if e.gpus > gpus:
        problems.append(Problem("engine.tensor_parallel_size", f"the engine needs {e.gpus} GPUs (tensor x pipeline "
                                f"x data parallel) but provider.gpu_count is {gpus}: SGLang cannot place its ranks",
                                hint=f"set provider.gpu_count to {e.gpus} or lower the parallel sizes"))
    # arg_groups/memory_hook.py:60: mem_fraction_static = (weights + KV pool) / GPU memory; what is left holds
    # activations and CUDA graphs (at least 10 GiB reserved on GPUs over 60 GiB, memory_hook.py:315).
    if e.mem_fraction_static is not None and e.mem_fraction_static > 0.95:
        problems.append(Problem("engine.mem_fraction_static", f"{e.mem_fraction_static} leaves under 5% of GPU "
                                "memory for activations and CUDA graphs: SGLang runs out of memory at start-up",
                                severity="warning", hint="use 0.9 or less, or leave it unset (SGLang estimates it)"))
    # arg_groups/fields/schedule.py:52: -1 turns chunked prefill off; any other value is a chunk of tokens, and
    # a chunk smaller than a page cannot be scheduled.
    if e.chunked_prefill_size == 0:
        problems.append(Problem("engine.chunked_prefill_size", "0 is not a chunk size",
                                hint="use -1 to turn chunked prefill off, or a token count such as 8192"))
    if e.speculative and e.speculative.method == "ngram" and e.speculative.prompt_lookup_min:
        problems.append(Problem("engine.speculative.prompt_lookup_min", "SGLang's NGRAM has no minimum match "
                                "length (arg_groups/fields/spec.py:252 speculative_ngram_*)", severity="warning",
                                hint="drop it; tune --speculative-ngram-* in extra_args"))
    problems += startup.deprecated_problems(e.version, e.extra_args)
    return problems + [Problem(EXTRA, f"{s} is an abbreviation of {full}", severity="warning",
                               hint=f"write {full}: a later SGLang may add an option that makes {s} ambiguous")
                       for s, full in options.abbreviations("sglang", e.version, e.extra_args)]


def fp8_compute(e) -> bool:
    """FP8 quantization asked for (w8a8_fp8 computes in FP8 too)."""
    return e.quantization in ("fp8", "w8a8_fp8")
