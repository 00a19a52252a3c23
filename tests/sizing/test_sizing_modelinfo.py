"""Architecture and weight size from config.json and the safetensors index: local folder and S3 store."""
from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

from infra.sizing.catalog import GIB
from infra.sizing.modelinfo import from_reader, local_reader, resolve, s3_reader, weights_on_gpus
from infra.sizing.plan import make_plan
from infra.stack.stackfile import parse_deployment
from tests.conftest import STACKS
from tests.support.harness import stack_config

LLAMA_CONFIG = {  # the fields of meta-llama/Llama-3.1-8B-Instruct's config.json that sizing reads
    "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
    "max_position_embeddings": 131072, "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "vocab_size": 128256, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
}
DEEPSEEK_CONFIG = {  # deepseek-ai/DeepSeek-V3 config.json (MLA, MoE, fp8 checkpoint)
    "hidden_size": 7168, "intermediate_size": 18432, "max_position_embeddings": 163840,
    "num_attention_heads": 128, "num_hidden_layers": 61, "num_key_value_heads": 128, "vocab_size": 129280,
    "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "n_routed_experts": 256,
    "num_experts_per_tok": 8, "torch_dtype": "bfloat16", "quantization_config": {"quant_method": "fp8"},
    "head_dim": 64,  # what newer transformers write for MLA (the rope part); sizing must not take it
}
TOTAL = 16_060_522_496  # Llama-3.1-8B-Instruct model.safetensors.index.json metadata.total_size


def write_model(folder: Path, config: dict, total: int | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    if total:
        (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": total},
                                                                          "weight_map": {}}))
    return folder


def test_config_json_and_index(tmp_path):
    info = from_reader(local_reader(write_model(tmp_path / "m", LLAMA_CONFIG, TOTAL)), "my-llama", "/m")
    a = info.arch
    assert (a.num_layers, a.num_kv_heads, a.head_dim, a.max_context) == (32, 8, 128, 131072)
    assert info.checkpoint_bytes == TOTAL and a.num_params == pytest.approx(8.03e9, rel=0.001)
    assert weights_on_gpus(info, None, "auto") == (TOTAL, "safetensors index total_size")
    fp8, how = weights_on_gpus(info, "fp8", "auto")  # online fp8 of a bf16 checkpoint: from the parameters
    assert 8.3 * GIB < fp8 < 8.6 * GIB and "fp8" in how


def test_mla_config(tmp_path):
    info = from_reader(local_reader(write_model(tmp_path / "ds", DEEPSEEK_CONFIG)), "ds", "/ds")
    a = info.arch
    assert a.is_mla and a.head_dim == 192 and a.num_experts == 256 and a.weights_dtype == "fp8"
    assert info.prequantized and info.checkpoint_bytes is None


def test_broken_config_is_a_sizing_error(tmp_path):
    from infra.errors import SizingError

    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "config.json").write_text('{"hidden_size": 1}')
    with pytest.raises(SizingError) as e:
        from_reader(local_reader(tmp_path / "b"), "b", "/b")
    assert e.value.where == "model.weights"


def _deployment(**model):
    config, _ = stack_config(STACKS[0])
    raw = json.loads(config["inferry:deployment"])
    raw["model"].update(model)
    return parse_deployment(raw, "test")


def test_local_weights_folder_wins_over_catalog(tmp_path):
    folder = write_model(tmp_path / "w", {**LLAMA_CONFIG, "max_position_embeddings": 65536}, TOTAL)
    d = _deployment(weights=str(folder))
    info = resolve(d)
    assert info.arch_source.startswith("config.json") and info.arch.max_context == 65536
    assert resolve(_deployment()).arch_source == "catalog"


BUCKET, PREFIX = "sizing-weights", "llama-3.1-8b-instruct"


@pytest.fixture(scope="module")
def s3(s3_server):
    """The session's real S3 server (tests/servers) with one model folder in a bucket of its own."""
    client = boto3.client("s3", endpoint_url=s3_server.endpoint, aws_access_key_id=s3_server.access_key,
                          aws_secret_access_key=s3_server.secret_key, region_name=s3_server.region,
                          config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
    client.create_bucket(Bucket=BUCKET)
    folder = write_model(s3_server.root.parent / "sizing-model", LLAMA_CONFIG, TOTAL)
    for f in folder.iterdir():  # through the API: the server caches its folder listing
        client.put_object(Bucket=BUCKET, Key=f"{PREFIX}/{f.name}", Body=f.read_bytes())
    return client


def test_weight_store_config(s3):
    read = s3_reader(s3, BUCKET, PREFIX)
    d = _deployment(name="served-name-not-in-catalog")
    assert read("missing.json") is None
    plan = make_plan(d, read=read)
    assert plan.model.arch_source.startswith("config.json") and plan.verdict.fits
    assert plan.model.checkpoint_bytes == TOTAL


def test_unreachable_store_is_a_storage_error():
    from infra.errors import StorageError

    client = boto3.client("s3", endpoint_url="http://127.0.0.1:9", aws_access_key_id="k", aws_secret_access_key="s",
                          region_name="us-east-1", config=Config(retries={"max_attempts": 1}, connect_timeout=1))
    with pytest.raises(StorageError) as e:
        s3_reader(client, "b", "p")("config.json")
    assert "s3://b/p/config.json" in e.value.message


def test_plan_from_store_via_cli(cli, s3, s3_server, tmp_path, monkeypatch):
    import yaml
    from tests.conftest import ROOT

    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.staging.yaml").read_text())
    dep = doc["config"]["inferry:deployment"]
    dep["model"].update(name="not-in-catalog", weights=f"s3://{BUCKET}/{PREFIX}")
    dep["storage"].update(endpoint=s3_server.endpoint, bucket=BUCKET, access_key_id={"env": "T_AK"},
                          secret_access_key={"env": "T_SK"})
    path = tmp_path / "Pulumi.store.yaml"
    path.write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("T_AK", s3_server.access_key)
    monkeypatch.setenv("T_SK", s3_server.secret_key)
    monkeypatch.setenv("INFERRY_STATE_DIR", str(tmp_path))
    r = cli("plan", str(path), "--from-store", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["architecture_source"].startswith("config.json")
    assert cli("plan", str(path)).exit_code == 1  # without the store the name is unknown
