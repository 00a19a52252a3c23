"""The engine tier for vLLM: vLLM 0.33's own code (`scripts/engine_tier.sh vllm`'s venv) judges what inferry renders,
what the snapshot parses and what the stand-in and inferry's start-up rules refuse. Its `vllm serve` option table
is the snapshot's, option for option; every bundled vLLM stack and a corpus covering every flag row pass vLLM's
start-up up to the model load, with the values the snapshot's parser reads; the lines the stand-in refuses vLLM
refuses with the same exit status; and each extra-args line inferry's validate refuses, vLLM refuses too."""
from __future__ import annotations

import json

import pytest

from infra.engines import options, service_spec
from infra.engines.vllm import service
from infra.engines.vllm.startup import startup_problems
from infra.stack.stackfile import load_stack
from tests.conftest import ROOT
from tests.engines.test_engines import deployment
from tests.support.engine_tier import run_verdict, tier_python
from tests.support.standin.argv import Refused, parse

VERDICT = ROOT / "tests" / "support" / "engine_verdict_vllm.py"
VERSION = "0.33.0"
BASE = {"kind": "vllm", "max_model_len": 32768}
DRAFT = "s3://inferry-weights/draft"
CORPUS = [
    {**BASE, "gpu_memory_utilization": 0.85, "tensor_parallel_size": 2, "pipeline_parallel_size": 2,
     "quantization": "fp8", "kv_cache_dtype": "fp8", "enable_prefix_caching": False, "block_size": 32,
     "max_num_seqs": 64, "max_num_batched_tokens": 8192, "enable_chunked_prefill": True, "dtype": "bfloat16"},
    {**BASE, "enable_chunked_prefill": False, "max_num_batched_tokens": 32768, "dtype": "float16",
     "quantization": "awq_marlin", "load_format": "safetensors"},
    {**BASE, "load_format": "runai_streamer", "quantization": "compressed-tensors"},
    *[{**BASE, "quantization": q} for q in ("gptq_marlin", "modelopt", "modelopt_fp4", "mxfp4")],
    *[{**BASE, "speculative": {"method": m, "num_speculative_tokens": 3, "model": DRAFT}}
      for m in ("eagle", "eagle3", "draft_model")],
    {**BASE, "speculative": {"method": "mtp", "num_speculative_tokens": 1}},
    {**BASE, "speculative": {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 6,
                             "prompt_lookup_min": 2}},
    {**BASE, "extra_args": ["--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--reasoning-parser",
                            "deepseek_r1", "--max-log-len", "100", "--uvicorn-log-level", "warning"]},
]
# Parser-level refusals the stand-in makes from the snapshot: argparse's exit status 2 in vLLM too.
REFUSED = [["--max-num-seqs", "two"], ["--gpu-memory-utilization", "most"], ["--no-such-flag", "1"],
           ["--enable-prefix-caching=yes"], ["--max-model-len", "1.5Ki"], ["--dtype", "float8"]]
# Names vLLM's parser takes and its config classes refuse (a traceback, exit 1) once the engine is built.
LATE = {"kv_cache_dtype": ["--kv-cache-dtype", "fp7"], "quantization": ["--quantization", "fp9"],
        "load_format": ["--load-format", "tarball"]}
# Extra args inferry's validate refuses (infra/engines/vllm/startup.py); vLLM refuses them before the model loads.
STARTUP = [["--enable-auto-tool-choice"], ["--enable-log-outputs"], ["--sse-keep-alive-interval", "-1"],
           ["--enable-per-request-metrics", "--disable-log-stats"],
           ["--enable-auto-tool-choice", "--tool-call-parser", "hermess"], ["--reasoning-parser", "deepseek-r2"]]


@pytest.fixture(scope="module")
def vllm_python() -> str:
    """The engine tier's vLLM python."""
    return tier_python("vllm")


def verdicts(python: str, argvs: list[list[str]]) -> list[dict]:
    """vLLM's start-up up to the model load on each `vllm serve` command line, in its own venv."""
    return run_verdict(python, VERDICT, argvs=argvs)


def test_the_real_parser_has_the_snapshot_option_for_option(vllm_python):
    real = {(o["dest"], tuple(o["flags"])): o["choices"] for o in run_verdict(vllm_python, VERDICT, "--options")}
    snap = {(o["dest"], tuple(sorted(o["flags"]))): o["choices"]
            for o in options.snapshot("vllm", VERSION)["options"] if o["flags"]}
    assert set(real) == set(snap)
    assert {k: v for k, v in real.items() if v != snap[k]} == {}


def test_every_rendered_line_starts_with_the_values_the_snapshot_reads(vllm_python):
    stacks = [load_stack(str(ROOT / "stacks" / name)).deployment
              for name in ("Pulumi.eu-ssh.yaml", "Pulumi.staging.yaml", "Pulumi.aws-k8s.yaml")]
    specs = [service_spec(d) for d in stacks + [deployment(e) for e in CORPUS]]
    assert all(s.command == ("vllm", "serve") for s in specs)
    rendered = {a.split("=")[0] for s in specs for a in s.args if a.startswith("--")}
    assert {f.flag for f in service.FLAGS} | {"--speculative-config", "--disable-prefix-caching", "--disable-chunked-prefill"} <= rendered
    results = verdicts(vllm_python, [list(s.args) for s in specs])
    for spec, got in zip(specs, results):
        assert got["ok"], (spec.args, got)
        assert options.check_args("vllm", spec.version, spec.args) == []
        ns = vars(options.parser("vllm", spec.version).parse_args(list(spec.args)))
        mine = {k: v for k, v in ns.items() if v is not None and v is not False}
        assert {k: got["values"][k] for k in mine} == mine, spec.args
        assert got["values"]["model"] == spec.model_dir  # the positional model, as `vllm serve` takes it


def test_what_the_stand_in_refuses_vllm_refuses(vllm_python):
    lines = [["/models/m", *extra] for extra in REFUSED]
    for argv, got in zip(lines, verdicts(vllm_python, lines)):
        assert not got["ok"], argv
        with pytest.raises(Refused) as e:
            parse("vllm", ["serve", *argv])
        assert e.value.code == got["code"] == 2, (argv, got, str(e.value))


def test_the_names_vllm_checks_after_parsing_are_the_snapshot_s(vllm_python):
    real = run_verdict(vllm_python, VERDICT, "--values")
    assert {k: v for k, v in options.snapshot("vllm", VERSION)["values"].items() if k in real} == real
    lines = [["/models/m", *argv] for argv in LATE.values()]
    for (dest, argv), got in zip(LATE.items(), verdicts(vllm_python, lines)):
        assert got["ok"] and argv[1] not in real[dest], (argv, got)  # parsed, and not a name vLLM knows
        with pytest.raises(Refused) as e:
            parse("vllm", ["serve", "/models/m", *argv])
        assert e.value.code == 1, str(e.value)


def test_what_validate_refuses_in_extra_args_vllm_refuses_at_start_up(vllm_python):
    specs = [service_spec(deployment({**BASE, "extra_args": extra})) for extra in STARTUP]
    for extra, spec, got in zip(STARTUP, specs, verdicts(vllm_python, [list(s.args) for s in specs])):
        assert not got["ok"] and got["code"] == 1, (extra, got)
        assert startup_problems(deployment({**BASE, "extra_args": extra}), None), (extra, got["error"])


def test_every_lora_line_inferry_renders_passes_vllm_and_one_it_would_refuse_does_not(vllm_python):
    """model.adapters' flags through vLLM's own parser (LoRAParserAction reads each JSON module) and its
    LoRAConfig; a CPU cache smaller than the GPU slots, which inferry never renders, vLLM refuses."""
    from tests.engines.test_engines_lora import TWO, with_adapters

    ranks = [{"name": f"r{r}", "weights": f"a/r{r}", "rank": r} for r in (1, 4, 8, 40, 320, 512)]
    forms = [with_adapters(BASE), with_adapters(BASE, ranks, adapter_slots=3), with_adapters(BASE, TWO[:1])]
    specs = [service_spec(d) for d in forms]
    bad = [*specs[0].args, "--max-cpu-loras", "1"]
    results = verdicts(vllm_python, [list(s.args) for s in specs] + [bad])
    for spec, got in zip(specs, results):
        assert got["ok"], (spec.args, got)
        ns = options.parse("vllm", spec.version, spec.args)
        assert [got["values"][k] for k in ("max_loras", "max_lora_rank", "max_cpu_loras", "enable_lora")] == \
            [ns.max_loras, ns.max_lora_rank, ns.max_cpu_loras, True]
        read = [json.loads(m) for m in ns.lora_modules]  # each adapter as vLLM read it: name, path, base model
        assert [r.split(", is_3d")[0] for r in got["values"]["lora_modules"]] == [
            f"LoRAModulePath(name='{m['name']}', path='{m['path']}', base_model_name='{m['base_model_name']}'"
            for m in read]
    assert not results[-1]["ok"] and "max_cpu_loras (1) must be >= max_loras (2)" in results[-1]["error"]
