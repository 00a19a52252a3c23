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
