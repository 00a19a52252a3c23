"""The engine tier: SGLang's own code (scripts/engine_tier.sh's venv) judges what inferry renders and what the
stand-in and the snapshot answer. Its parser's option table is the snapshot's, option for option; every bundled
SGLang stack and a corpus covering every flag row parse there with the key merged from the launch wrapper's file,
to the values the snapshot's parser reads; and the lines the stand-in refuses, SGLang refuses too."""
from __future__ import annotations

import pytest

from infra.engines import options, service_spec
from infra.engines.sglang import service
from infra.stack.stackfile import load_stack
from tests.conftest import ROOT
from tests.engines.test_engines import deployment
from tests.support.engine_tier import run_verdict, tier_python
from tests.support.standin.argv import Refused, parse

VERDICT = ROOT / "tests" / "support" / "engine_verdict.py"
KEY = "sk-it's a \"key\" with $ and #"
BASE = {"kind": "sglang", "max_model_len": 32768}
CORPUS = [
    {**BASE, "mem_fraction_static": 0.85, "tensor_parallel_size": 2, "pipeline_parallel_size": 2,
     "data_parallel_size": 2, "quantization": "fp8", "kv_cache_dtype": "fp8", "chunked_prefill_size": 4096,
     "max_running_requests": 64, "dtype": "bfloat16"},
    {**BASE, "chunked_prefill_size": -1, "kv_cache_dtype": "fp8_e5m2", "dtype": "float16", "quantization": "awq"},
    *[{**BASE, "quantization": q} for q in ("gptq_marlin", "compressed-tensors", "modelopt_fp4", "w8a8_int8")],
    *[{**BASE, "speculative": {"method": m, "num_speculative_tokens": 3, "model": "s3://inferry-weights/draft"}}
      for m in ("eagle", "eagle3", "draft_model")],
    {**BASE, "speculative": {"method": "mtp", "num_speculative_tokens": 1}},
    {**BASE, "speculative": {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 6}},
    {**BASE, "extra_args": ["--page-size", "16", "--attention-backend", "triton", "--log-level", "warning"]},
]
REFUSED = [["--mem-frac-static", "0.8"], ["--quantization", "bogus"], ["--tp-size", "two"],
           ["--context-length", "1.5Ki"], ["--enable-metrics", "yes"]]


@pytest.fixture(scope="module")
def sglang_python() -> str:
    """The engine tier's SGLang python."""
    return tier_python("sglang")


def verdicts(python: str, argvs: list[list[str]]) -> list[dict]:
    """SGLang's prepare_server_args on each command line, in its own venv."""
    return run_verdict(python, VERDICT, argvs=argvs)


def wrapped(args: tuple[str, ...], tmp_path) -> list[str]:
    """The command line the launch wrapper hands SGLang: the args, then --config with the key's YAML file,
    written as the wrapper writes it (single-quoted, quotes doubled)."""
    folder = tmp_path / "tmp.wrapper"
    folder.mkdir(exist_ok=True)
    key_file = folder / "inferry-auth.yaml"
    key_file.write_text("api-key: '" + KEY.replace("'", "''") + "'\n")
    return [*args, "--config", str(key_file)]


def test_the_real_parser_has_the_snapshot_option_for_option(sglang_python):
    real = {(o["dest"], tuple(o["flags"])): o["choices"] for o in run_verdict(sglang_python, VERDICT, "--options")}
    snap = {(o["dest"], tuple(sorted(o["flags"]))): sorted(map(str, o["choices"])) if o["choices"] else None
            for o in options.snapshot("sglang", "0.5.23")["options"]}
    assert set(real) == set(snap)
    assert {k: v for k, v in real.items() if v != snap[k]} == {}


def test_every_rendered_line_starts_with_the_values_the_snapshot_reads(sglang_python, tmp_path):
    stacks = [load_stack(str(ROOT / "stacks" / "Pulumi.eu-ssh-sglang.yaml")).deployment]
    specs = [service_spec(d) for d in stacks + [deployment(e) for e in CORPUS]]
    rendered = {a for s in specs for a in s.args if a.startswith("--")}
    assert {f.flag for f in service.FLAGS} | set(service.SPECULATIVE_FLAGS) <= rendered  # every row covered
    results = verdicts(sglang_python, [wrapped(s.args, tmp_path) for s in specs])
    for spec, got in zip(specs, results):
        assert got["ok"], (spec.args, got)
        assert options.check_args("sglang", spec.version, spec.args) == []
        ns = vars(options.parse("sglang", spec.version, spec.args))
        mine = {k: v for k, v in ns.items() if v is not None and v is not False}
        assert {k: got["values"][k] for k in mine} == mine, spec.args
        assert got["values"]["api_key"] == KEY and got["values"]["enable_metrics"] is True


def test_what_the_stand_in_refuses_sglang_refuses(sglang_python, tmp_path):
    bad_name = tmp_path / "tmp.Xy12AB"  # the old wrapper's `mktemp` name
    bad_name.write_text("api-key: k\n")
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    lines = [["--model-path", str(model), *extra] for extra in REFUSED]
    lines.append(["--model-path", str(model), "--config", str(bad_name)])
    lines.append(wrapped(("--model-path", str(model)), tmp_path) + ["--config", str(bad_name)])
    real = verdicts(sglang_python, lines)
    for argv, got in zip(lines, real):
        assert not got["ok"], argv
        with pytest.raises(Refused) as e:
            parse("sglang.launch_server", argv)
        assert e.value.code == got["code"], (argv, got, str(e.value))


def test_every_lora_line_inferry_renders_parses_in_sglang_to_the_adapters(sglang_python, tmp_path):
    """model.adapters' flags through SGLang's own prepare_server_args: each NAME=PATH becomes its adapter, the
    slots and the rank limit as rendered."""
    from tests.engines.test_engines_lora import TWO, with_adapters

    ranks = [{"name": f"r{r}", "weights": f"a/r{r}", "rank": r} for r in (1, 4, 40, 1024)]
    specs = [service_spec(d) for d in (with_adapters(BASE), with_adapters(BASE, ranks, adapter_slots=2),
                                       with_adapters(BASE, TWO[:1]))]
    for spec, got in zip(specs, verdicts(sglang_python, [wrapped(s.args, tmp_path) for s in specs])):
        assert got["ok"], (spec.args, got)
        ns = options.parse("sglang", spec.version, spec.args)
        assert (got["values"]["max_loras_per_batch"], got["values"]["max_lora_rank"], got["values"]["enable_lora"]) \
            == (ns.max_loras_per_batch, ns.max_lora_rank, True)
        for entry in ns.lora_paths:
            name, path = entry.split("=", 1)
            assert name in str(got["values"]["lora_paths"]) and path in str(got["values"]["lora_paths"])
