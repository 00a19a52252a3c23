"""SGLang, the third engine: snapshot, flags, start-up rules, sizing, SSH and Kubernetes renders, init."""
from __future__ import annotations

import os

import pytest
import yaml

from infra.engines import options, service_spec
from infra.engines.registry import engine_for
from infra.engines.sglang import sizing
from infra.sizing.catalog import resolve_gpu
from infra.stack.stackfile import load_stack
from infra.stack.validate import findings
from infra.targets.kubernetes.manifests import render_kubernetes
from infra.targets.ssh.render import ssh_spec
from tests.conftest import ROOT
from tests.engines.test_engines import deployment
from tests.render.test_render import GOLDEN, golden_files, ssh_deployment
from tests.support.kubernetes_schema import validate

STACK = ROOT / "stacks" / "Pulumi.eu-ssh-sglang.yaml"
SGLANG = {"kind": "sglang", "max_model_len": 32768, "mem_fraction_static": 0.85}


def test_snapshot_records_the_wheel_and_the_options_inferry_renders():
    snap = options.snapshot("sglang", "0.5.23")
    assert snap["source"]["wheel"].startswith("sglang-0.5.23-") and len(snap["source"]["sha256"]) == 64
    dests = {o["dest"]: o for o in snap["options"]}
    assert {"--tp-size", "--tensor-parallel-size"} <= set(dests["tp_size"]["flags"])
    assert dests["port"]["default"] == 30000 and dests["host"]["default"] == "127.0.0.1"
    assert "fp8" in dests["quantization"]["choices"] and dests["context_length"]["type"] == "si_iec_int"


def test_flags_rendered_and_accepted_by_the_snapshot():
    spec = service_spec(deployment({**SGLANG, "tensor_parallel_size": 2, "kv_cache_dtype": "fp8",
                                    "speculative": {"method": "eagle3", "num_speculative_tokens": 3,
                                                    "model": "s3://inferry-weights/eagle3"}}))
    assert spec.command[:2] == ("sh", "-c") and "exec python3 -m sglang.launch_server" in spec.command[2]
    assert options.check_args("sglang", spec.version, spec.args) == []
    ns = options.parse("sglang", spec.version, spec.args)
    assert (ns.model_path, ns.tp_size, ns.context_length, ns.kv_cache_dtype) == (spec.model_dir, 2, 32768, "fp8_e4m3")
    assert (ns.speculative_algorithm, ns.speculative_num_steps, ns.speculative_draft_model_path) == \
        ("EAGLE3", 3, "/models/eagle3")
    assert "--api-key" not in spec.args and [e.name for e in spec.secret_env()] == ["INFERRY_SGLANG_API_KEY"]
    assert spec.image == "lmsysorg/sglang:v0.5.23" and not spec.needs_auth_proxy
    assert spec.queue_metric == "sglang:num_queue_reqs" and spec.gpus == 2


def test_bad_extra_arg_refused_with_did_you_mean():
    problems = findings(deployment({**SGLANG, "extra_args": ["--mem-frac-static", "0.8"]}))
    assert any("did you mean --mem-fraction-static?" in p.message for p in problems)


@pytest.mark.parametrize("extra,field", [(["--api-key", "k"], "serving.api_key"), (["--tp", "2"],
                                          "engine.tensor_parallel_size"), (["--port", "9"], "serving.port")])
def test_extra_args_that_set_what_inferry_owns_are_refused(extra, field):
    problems = [p for p in findings(deployment({**SGLANG, "extra_args": extra})) if p.severity == "error"]
    assert any(field in (p.hint or "") for p in problems), problems


def test_startup_rules_without_a_model():
    too_many = findings(deployment({**SGLANG, "tensor_parallel_size": 2, "data_parallel_size": 2}))
    assert any("needs 4 GPUs" in p.message for p in too_many)
    assert any(p.path == "engine.chunked_prefill_size" for p in findings(deployment({**SGLANG, "chunked_prefill_size": 0})))
    high = findings(deployment({**SGLANG, "mem_fraction_static": 0.97}))
    assert any(p.path == "engine.mem_fraction_static" and p.severity == "warning" for p in high)
    assert any(p.path == "engine.max_model_len" for p in findings(deployment({**SGLANG, "max_model_len": 10**6})))


def test_sizing_model_follows_sglang_defaults():
    model, h100, l4 = engine_for("sglang").sizing, resolve_gpu("H100-80GB"), resolve_gpu("L4")
    d = deployment({"kind": "sglang"})
    assert model.kv_share_of == "total" and model.memory_fraction(d.engine) == 0.88
    assert (sizing.chunked_prefill(d, h100), sizing.max_seqs(d, h100)) == (8192, 256)
    assert (sizing.chunked_prefill(d, l4), sizing.max_seqs(d, l4)) == (4096, 48)


def test_plan_fits_the_example(cli):
    result = cli("plan", str(STACK))
    assert result.exit_code == 0, result.output


def test_golden_render_of_the_example():
    folder, files = GOLDEN / "eu-ssh-sglang", golden_files(STACK)
    if os.environ.get("INFERRY_UPDATE_GOLDEN") == "1":
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (folder / name).write_text(text)
    assert sorted(p.name for p in folder.iterdir()) == sorted(files)
    for name, text in files.items():
        assert (folder / name).read_text() == text, name
    assert "INFERRY_SGLANG_API_KEY" not in files["compose.yaml"].split("env_file")[0].split("command:")[1]


@pytest.mark.parametrize("runtime", ["docker", "process"])
def test_ssh_renders_both_runtimes(runtime):
    from infra.targets.ssh.render import render_ssh_files

    d = ssh_deployment(SGLANG, runtime)
    files = render_ssh_files(d)
    text = "\n".join(f.content for f in files)
    assert "sglang.launch_server" in text and "--model-path" in text
    assert ssh_spec(d).engine == "sglang"


def test_kubernetes_manifests_are_schema_valid(tmp_path):
    raw = yaml.safe_load((ROOT / "stacks" / "Pulumi.aws-k8s.yaml").read_text())
    raw["config"]["inferry:deployment"]["engine"] = SGLANG
    path = tmp_path / "Pulumi.k8s-sglang.yaml"
    path.write_text(yaml.safe_dump(raw))
    manifests = [yaml.safe_load(text) for text in render_kubernetes(load_stack(str(path))).values()]
    for m in manifests:
        validate(m)
    pod = next(m for m in manifests if m["kind"] == "Deployment")["spec"]["template"]["spec"]
    engine = next(c for c in pod["containers"] if "sglang" in c["image"])
    assert engine["command"][:2] == ["sh", "-c"] and "--model-path" in engine["args"]


def test_init_writes_a_valid_sglang_stack(cli, tmp_path):
    path = tmp_path / "Pulumi.new.yaml"
    assert cli("init", str(path), "--engine", "sglang").exit_code == 0
    assert load_stack(str(path)).deployment.engine.kind == "sglang"
    assert cli("validate", str(path)).exit_code == 0


def _errors(engine: dict) -> list:
    return [p for p in findings(deployment(engine)) if p.severity == "error"]


@pytest.mark.parametrize("extra,field", [
    (["--quantization", "awq"], "engine.quantization"), (["--kv-cache-dtype", "fp8_e5m2"], "engine.kv_cache_dtype"),
    (["--chunked-prefill-size", "4096"], "engine.chunked_prefill_size"),
    (["--max-running-requests", "8"], "engine.max_running_requests"), (["--dtype", "float16"], "engine.dtype"),
    (["--speculative-algorithm", "NGRAM"], "engine.speculative"), (["--context-length", "4096"],
                                                                 "engine.max_model_len")])
def test_extra_args_that_override_a_typed_field_are_refused(extra, field):
    # SGLang's argparse lets the later flag win, so the field sizing reads would be silently overridden.
    problems = _errors({**SGLANG, "extra_args": extra})
    assert [p.path for p in problems] == ["engine.extra_args"] and field in problems[0].hint, problems


def test_metrics_are_always_on():
    ns = options.parse("sglang", "0.5.23", service_spec(deployment(SGLANG)).args)
    assert ns.enable_metrics is True
    assert any("--enable-metrics is set by inferry" in p.message
               for p in _errors({**SGLANG, "extra_args": ["--enable-metrics"]}))


@pytest.mark.parametrize("method", ["eagle", "ngram"])
def test_pipeline_parallel_with_speculative_decoding_is_refused(method):
    spec = {"method": method, "num_speculative_tokens": 2,
            **({"model": "s3://inferry-weights/eagle"} if method == "eagle" else {"prompt_lookup_max": 4})}
    problems = _errors({**SGLANG, "pipeline_parallel_size": 2, "speculative": spec})
    assert any(p.path == "engine.speculative" and "pipeline parallelism" in p.message for p in problems), problems
    assert not any(p.path == "engine.speculative" for p in _errors({**SGLANG, "pipeline_parallel_size": 2}))


@pytest.mark.parametrize("extra,chunk,refused", [
    (["--page-size", "64"], 1000, True), (["--page-size", "64"], 4096, False), ([], 1000, False),
    (["--attention-backend", "flashmla"], 1000, True), (["--attention-backend", "trtllm_mha", "--page-size", "16"],
                                                        1008, False)])
def test_chunked_prefill_must_be_a_whole_number_of_pages(extra, chunk, refused):
    problems = [p for p in _errors({**SGLANG, "chunked_prefill_size": chunk, "extra_args": extra})
                if p.path == "engine.chunked_prefill_size"]
    assert bool(problems) is refused, problems
    if refused:
        assert "multiple of the KV page size 64" in problems[0].message and "use 960" in problems[0].hint


def test_ngram_renders_the_longest_match_it_was_given():
    spec = service_spec(deployment({**SGLANG, "speculative": {"method": "ngram", "num_speculative_tokens": 3,
                                                               "prompt_lookup_max": 5}}))
    ns = options.parse("sglang", spec.version, spec.args)
    assert (ns.speculative_algorithm, ns.speculative_num_draft_tokens, ns.speculative_ngram_max_trie_depth) == \
        ("NGRAM", 4, 5)


def test_deprecated_spellings_warn_with_what_sglang_says_instead():
    problems = findings(deployment({**SGLANG, "extra_args": ["--disable-cuda-graph"]}))
    (warning,) = [p for p in problems if "deprecated" in p.message]
    assert warning.severity == "warning" and "--cuda-graph-backend-{decode,prefill}=disabled" in warning.hint

