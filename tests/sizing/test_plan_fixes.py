"""`inferry plan` as a new user meets it: no unused secrets needed, n/a instead of figures that mean nothing,
fixes that work (smaller TP too, every field they set), the engine's own batch defaults, clear refusals."""
from __future__ import annotations

import re

import pytest

from infra.sizing import catalog
from infra.errors import SizingError
from infra.sizing.modelinfo import from_reader, local_reader
from infra.sizing.plan import make_plan, max_seqs
from infra.stack.stackfile import load_stack
from tests.conftest import ROOT
from tests.sizing.test_plan import make_stack, plan_json
from tests.sizing.test_sizing_modelinfo import LLAMA_CONFIG, write_model


@pytest.fixture(autouse=True)
def _state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERRY_STATE_DIR", str(tmp_path / "state"))


def readme_stack(tmp_path) -> str:
    """The stack file the README shows, as written there (placeholder ciphertext, store keys never set)."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## The stack file.*?```yaml\n(.*?)```", text, re.S).group(1)
    path = tmp_path / "Pulumi.readme.yaml"
    path.write_text(block)
    return str(path)


def test_the_readme_stack_plans_without_the_secrets_plan_does_not_read(cli, tmp_path):
    path = readme_stack(tmp_path)
    code, doc = plan_json(cli, path)
    assert code == 0 and doc["fits"]
    r = cli("plan", path, "--from-store")  # reading the store does need its keys: named, before any request
    assert r.exit_code == 1 and "inferry:s3AccessKey is not set" in r.stderr
    assert "apiKey" not in r.stderr and "sshPrivateKey" not in r.stderr
    assert cli("validate", path).exit_code == 1  # validate still checks every secret


def test_a_stack_that_does_not_fit_shows_n_a_not_negative_figures(cli, tmp_path):
    path = make_stack(tmp_path, "big", model={"name": "llama-3.1-70b-instruct"},
                      engine={"quantization": None, "max_model_len": 131072})
    code, doc = plan_json(cli, path)
    assert code == 1 and not doc["fits"]
    assert doc["kv_budget_bytes_per_gpu"] is None and doc["cpm_usd"] is None and doc["headroom_bytes"] is None
    r = cli("plan", path)
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in r.stdout.splitlines()
            if line.count("│") == 3 and line.split("│")[1].strip()}
    assert rows["KV budget per GPU"].startswith("n/a") and rows["CPM"].startswith("n/a")
    assert rows["headroom"] == "n/a" and "-" not in rows["KV budget per GPU"]


def test_a_tp_that_does_not_divide_the_heads_gets_a_smaller_tp_with_its_gpu_count(cli, tmp_path):
    path = make_stack(tmp_path, "tp8", model={"name": "qwen2.5-7b-instruct"},
                      engine={"tensor_parallel_size": 8}, provider={"gpu_count": 8})
    code, doc = plan_json(cli, path)
    assert code == 1 and "does not divide" in doc["reason"]
    [fix] = [f for f in doc["fixes"] if f["field"] == "engine.tensor_parallel_size"]
    assert fix["set"] == {"engine.tensor_parallel_size": 4, "provider.gpu_count": 4}
    r = cli("plan", path)
    assert "set engine.tensor_parallel_size: 4, provider.gpu_count: 4" in r.stderr
    fixed = make_stack(tmp_path, "tp4", model={"name": "qwen2.5-7b-instruct"},
                       engine={"tensor_parallel_size": 4}, provider={"gpu_count": 4})
    assert plan_json(cli, fixed)[1]["fits"]  # the printed fix works


def test_suggest_with_no_option_says_why(cli, tmp_path):
    huge = {"name": "my-huge-model", "architecture": {
        "num_layers": 200, "num_attention_heads": 128, "num_kv_heads": 128, "head_dim": 128,
        "hidden_size": 16384, "vocab_size": 128000, "max_context": 131072, "num_params": 8e12}}
    path = make_stack(tmp_path, "huge", model=huge)
    r = cli("plan", path, "--suggest")
    assert r.exit_code == 1
    assert "--suggest: no option: no catalog GPU fits my-huge-model" in r.stderr
    assert "8 GPUs per replica" in r.stderr


def test_throughput_follows_vllms_default_max_num_seqs(tmp_path):
    path = make_stack(tmp_path, "seqs", engine={"max_num_seqs": None})
    d = load_stack(path).deployment
    assert max_seqs(d, catalog.gpu("H100-80GB")) == 1024 and max_seqs(d, catalog.gpu("A100-80GB")) == 256
    p = make_plan(d)
    batch = min(1024, p.verdict.kv_capacity_tokens // 1024)
    assert batch > 256  # the old cap would have hidden this
    assert p.throughput.detail == f"bandwidth-bound decode, {batch} sequences x 1024 tokens"
    set_128 = make_plan(load_stack(make_stack(tmp_path, "s128", engine={"max_num_seqs": 128})).deployment)
    assert "128 sequences" in set_128.throughput.detail


def test_zero_attention_heads_in_config_json_is_a_clear_error(tmp_path):
    folder = write_model(tmp_path / "m", {**LLAMA_CONFIG, "num_attention_heads": 0})
    with pytest.raises(SizingError) as e:
        from_reader(local_reader(folder), "m", "/m")
    assert "num_attention_heads is 0; expected a whole number above 0" in e.value.message
    assert e.value.where == "model.weights"


def test_price_zero_is_warned_about_in_validate_and_plan(cli, tmp_path):
    path = make_stack(tmp_path, "free", provider={"price_per_gpu_hour": 0})
    r = cli("validate", path)
    assert r.exit_code == 0 and "warning: provider.price_per_gpu_hour: 0 makes every cost $0" in r.stderr
    code, doc = plan_json(cli, path)
    assert code == 0 and any("price_per_gpu_hour 0" in n for n in doc["notes"])
    assert "price_per_gpu_hour 0" in " ".join(cli("plan", path).stdout.split())


def test_table_says_estimate_once_and_one_concurrency_figure(cli):
    text = " ".join(cli("plan", "eu-ssh").stdout.replace("│", " ").split())
    assert "[estimate: bandwidth-bound decode" in text and "ESTIMATE" not in text
    shown = re.search(r"max concurrency ([\d.]+) requests", text).group(1)
    verdict = re.search(r"fits: [\d,]+ KV tokens, ([\d.]+) concurrent requests", text).group(1)
    assert shown == verdict

