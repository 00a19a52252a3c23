"""`inferry plan` end to end: bundled stacks, the catalog matrix, refusals with the smallest fix, --json, --suggest."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from infra.sizing.catalog import GIB
from infra.sizing.measurements import load_measured_tps, record_measured_tps
from tests.conftest import ROOT, STACKS

PRICES = {"eu-ssh": (2.79, 2), "staging": (2.79, 1), "aws-k8s": (6.88, 2)}  # price per GPU-hour, replicas
KEYS = {"gpu", "gpu_count", "fits", "weights_bytes_per_gpu", "kv_bytes_per_token", "kv_capacity_tokens",
        "max_concurrency", "usd_per_hour", "cpm_usd", "tps_source"}


@pytest.fixture(autouse=True)
def _state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERRY_STATE_DIR", str(tmp_path / "state"))


def plan_json(cli, stack: str, *extra: str) -> tuple[int, dict]:
    r = cli("plan", stack, "--json", *extra)
    return r.exit_code, json.loads(r.stdout)


def make_stack(tmp_path: Path, name: str, model: dict | None = None, engine: dict | None = None,
               provider: dict | None = None) -> str:
    """A copy of the eu-ssh example with some fields changed; returns its path."""
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.eu-ssh.yaml").read_text())
    dep = doc["config"]["inferry:deployment"]
    for section, changes in (("model", model), ("engine", engine), ("provider", provider)):
        dep[section].update(changes or {})
        dep[section] = {k: v for k, v in dep[section].items() if v is not None}
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


@pytest.mark.parametrize("stack_file", STACKS, ids=lambda p: p.stem)
def test_bundled_stacks_fit_with_right_figures(cli, stack_file):
    name = stack_file.name.removeprefix("Pulumi.").removesuffix(".yaml")
    code, doc = plan_json(cli, name)
    assert code == 0 and KEYS <= set(doc)
    assert doc["fits"] and doc["gpu"] == "H100-80GB" and doc["gpu_count"] == 1
    assert doc["kv_bytes_per_token"] == 128 * 1024  # llama 8B, bf16 KV (docs/facts.md)
    assert 8.3 < doc["weights_bytes_per_gpu"] / GIB < 8.6  # fp8 linear layers, bf16 embeddings
    assert 55 * GIB < doc["kv_capacity_tokens"] * doc["kv_bytes_per_token"] < 62 * GIB
    assert doc["max_concurrency"] == round(doc["kv_capacity_tokens"] / 32768, 2) and doc["max_concurrency"] > 10
    price, replicas = PRICES[name]
    assert doc["usd_per_hour"] == pytest.approx(price * replicas)
    assert doc["cpm_usd"] == pytest.approx(price / (doc["tokens_per_second"] * 3600 / 1e6), rel=1e-3)
    assert doc["tps_source"] == "estimate"


# (fits at 8k, fits at 128k) for one GPU, TP 1, checkpoint dtype, KV in bf16, gpu_memory_utilization 0.9.
# Weights alone: 8B 15 GiB, 70B 131.5 GiB, 72B 135 GiB, Mixtral 87 GiB, 405B 756 GiB, DeepSeek-V3 (fp8) ~627 GiB;
# usable: H100 71.2, A100-80GB 71.5, H200 125.9, B200 160.7 GiB. Qwen2.5/Mistral/Mixtral stop at 32k context.
YES_YES, YES_NO, NO_NO = (True, True), (True, False), (False, False)
EXPECTED = {
    "llama-3.1-8b": dict.fromkeys(("H100-80GB", "H200", "A100-80GB", "B200"), YES_YES),
    "qwen2.5-7b": dict.fromkeys(("H100-80GB", "H200", "A100-80GB", "B200"), YES_NO),
    "mistral-7b": dict.fromkeys(("H100-80GB", "H200", "A100-80GB", "B200"), YES_NO),
    "mixtral-8x7b": {"H100-80GB": NO_NO, "A100-80GB": NO_NO, "H200": YES_NO, "B200": YES_NO},
    "llama-3.1-70b": {"H100-80GB": NO_NO, "A100-80GB": NO_NO, "H200": NO_NO, "B200": YES_NO},
    "llama-3.3-70b": {"H100-80GB": NO_NO, "A100-80GB": NO_NO, "H200": NO_NO, "B200": YES_NO},
    "qwen2.5-72b": {"H100-80GB": NO_NO, "A100-80GB": NO_NO, "H200": NO_NO, "B200": YES_NO},
    "llama-3.1-405b": dict.fromkeys(("H100-80GB", "H200", "A100-80GB", "B200"), NO_NO),
    "deepseek-v3": dict.fromkeys(("H100-80GB", "H200", "A100-80GB", "B200"), NO_NO),
}
MATRIX = [(m, g, ctx, want[i]) for m, gpus in EXPECTED.items() for g, want in gpus.items()
          for i, ctx in enumerate((8192, 131072))]


@pytest.mark.parametrize("model,gpu,ctx,fits", MATRIX, ids=[f"{m}-{g}-{c // 1024}k" for m, g, c, _ in MATRIX])
def test_catalog_models_on_each_gpu(cli, tmp_path, model, gpu, ctx, fits):
    path = make_stack(tmp_path, "m", model={"name": model}, engine={"quantization": None, "max_model_len": ctx},
                      provider={"gpu": gpu})
    code, doc = plan_json(cli, path)
    assert (code == 0) == fits == doc["fits"], doc["reason"]
    if not fits:
        assert doc["reason"]


def test_infeasible_stack_exits_1_with_the_smallest_fix(cli, tmp_path):
    path = make_stack(tmp_path, "big", model={"name": "llama-3.1-70b-instruct"}, engine={"max_model_len": 32768})
    r = cli("plan", path)
    assert r.exit_code == 1
    assert "does not fit" in r.stderr and "fix: set engine." in r.stderr
    code, doc = plan_json(cli, path)
    assert code == 1 and not doc["fits"]
    fields = [f["field"] for f in doc["fixes"]]
    assert fields and len(set(fields)) == len(fields)
    # each proposed fix, applied alone with every field it sets, really fits
    for f in doc["fixes"]:
        assert next(iter(f["set"].items())) == (f["field"], f["value"])
        changes: dict[str, dict] = {"engine": {"max_model_len": 32768}, "provider": {}}
        for field, value in f["set"].items():
            section, key = field.split(".")
            changes[section][key] = value
        fixed = make_stack(tmp_path, "fixed", model={"name": "llama-3.1-70b-instruct"}, **changes)
        assert plan_json(cli, fixed)[1]["fits"], f


def test_context_beyond_the_model_is_refused_with_its_maximum(cli, tmp_path):
    path = make_stack(tmp_path, "long", model={"name": "qwen2.5-7b-instruct"}, engine={"max_model_len": 131072})
    code, doc = plan_json(cli, path)
    assert code == 1 and "maximum context 32,768" in doc["reason"]
    assert {"field": "engine.max_model_len", "value": 32768} in [{k: f[k] for k in ("field", "value")}
                                                                 for f in doc["fixes"]]


def test_unknown_gpu_and_model_are_clean_errors(cli, tmp_path):
    r = cli("plan", make_stack(tmp_path, "g", provider={"gpu": "H100"}))
    assert r.exit_code == 1 and "did you mean 'H100-80GB'" in r.stderr and "Traceback" not in r.stderr
    r = cli("plan", make_stack(tmp_path, "m", model={"name": "my-own-model"}))
    assert r.exit_code == 1 and "model.architecture" in r.stderr


def test_architecture_override_is_used(cli, tmp_path):
    arch = {"num_layers": 16, "num_attention_heads": 32, "num_kv_heads": 8, "head_dim": 64, "hidden_size": 2048,
            "vocab_size": 128256, "max_context": 131072, "num_params": 1.24e9}
    code, doc = plan_json(cli, make_stack(tmp_path, "o", model={"name": "my-1b", "architecture": arch}))
    assert code == 0 and doc["architecture_source"] == "stack model.architecture"
    assert doc["kv_bytes_per_token"] == 2 * 16 * 8 * 64 * 2


def test_measured_then_stack_then_estimate(cli, tmp_path):
    path = make_stack(tmp_path, "tps", provider={"tokens_per_second": 2000.0})
    assert plan_json(cli, path)[1]["tps_source"] == "stack"
    record_measured_tps("tps", 3000.0, {"concurrency": 64})
    code, doc = plan_json(cli, path)
    assert doc["tps_source"] == "measured" and doc["tokens_per_second"] == 3000.0
    assert doc["cpm_usd"] == pytest.approx(2.79 / (3000 * 3600 / 1e6), rel=1e-3)
    assert load_measured_tps("tps").details == {"concurrency": 64}


def test_suggest_ranks_by_cpm_and_keeps_residency(cli):
    code, doc = plan_json(cli, "eu-ssh", "--suggest")
    rows = doc["suggest"]
    assert code == 0 and rows
    assert [r["cpm_usd"] for r in rows] == sorted(r["cpm_usd"] for r in rows)
    assert all(r["region"] in ("es-madrid", "eu-central-1", "swedencentral", "westeurope") for r in rows)
    assert rows[0]["provider"] == "example-eu-cloud"
    r = cli("plan", "eu-ssh", "--suggest")
    assert r.exit_code == 0 and "cheapest per million output tokens" in r.stdout


def test_validate_reports_no_fit(cli, tmp_path):
    r = cli("validate", make_stack(tmp_path, "v", model={"name": "llama-3.1-405b"}))
    assert r.exit_code == 1 and "exceed" in r.stderr


def test_catalog_key_typo_suggests(cli, tmp_path):
    r = cli("plan", make_stack(tmp_path, "c", model={"name": "house-llm", "catalog": "llama-3.1-8"}))
    assert r.exit_code == 1 and "model.catalog" in r.stderr and "did you mean" in r.stderr
    code, doc = plan_json(cli, make_stack(tmp_path, "c2", model={"name": "house-llm", "catalog": "llama-3.1-8b"}))
    assert code == 0 and doc["model"] == "llama-3.1-8b"


TRTLLM = {"kind": "tensorrt-llm", "quantization": "fp8", "gpu_memory_utilization": None,
          "enable_prefix_caching": None, "max_num_seqs": None, "kv_cache_free_gpu_memory_fraction": 0.9}


def test_tensorrt_llm_fp8_needs_fp8_hardware(cli, tmp_path):
    code, doc = plan_json(cli, make_stack(tmp_path, "t", engine=TRTLLM, provider={"gpu": "H100-80GB"}))
    assert code == 0 and doc["fits"]
    a100 = make_stack(tmp_path, "t2", engine=TRTLLM, provider={"gpu": "A100-80GB"})
    planned, validated = cli("plan", a100, "--json"), cli("validate", a100)
    # One gate: plan refuses what validate refuses, with the same bullet, and prints no JSON for it.
    assert planned.exit_code == validated.exit_code == 1 and planned.stdout == ""
    bullets = [ln for ln in validated.stderr.splitlines() if ln.lstrip().startswith("•")]
    assert bullets and any("engine.quantization" in b and "8.9" in b for b in bullets)
    assert all(b in planned.stderr for b in bullets)


def test_vllm_fp8_on_a100_warns(cli, tmp_path):
    path = make_stack(tmp_path, "a", provider={"gpu": "A100-80GB"})
    code, doc = plan_json(cli, path)
    assert code == 0 and any("Marlin" in n for n in doc["notes"])
    r = cli("validate", path)
    assert r.exit_code == 0 and "warning" in r.stderr and "Marlin" in r.stderr


def test_table_labels_where_tokens_per_second_came_from(cli):
    result = cli("plan", "eu-ssh")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "[estimate:" in text and "bandwidth-bound" in text
