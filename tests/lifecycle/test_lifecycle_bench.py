"""`inferry bench`: a bounded, streamed load against a real OpenAI-compatible server (the stand-in engine)."""
from __future__ import annotations

import json

import pytest

from infra.lifecycle.deployer import OutputValue
from infra.lifecycle.loadgen import LoadSpec, percentile, run_load
from infra.lifecycle.status import endpoint_status
from infra.errors import InferryError
from infra.sizing.measurements import load_measured_tps
from tests.support.standin.process import free_port, start_engine

MODEL = "llama-3.1-8b-instruct"
KEY = "bench-key-0123"


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bench-model")
    (folder / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    running = start_engine(["serve", str(folder), "--host", "127.0.0.1", "--port", str(free_port()),
                            "--served-model-name", MODEL], folder / "engine.log", env={"VLLM_API_KEY": KEY})
    yield running
    running.stop()


def test_percentile_interpolates():
    assert percentile([3.0, 1.0, 2.0, 4.0], 0.5) == 2.5
    assert percentile([5.0], 0.99) == 5.0
    with pytest.raises(InferryError):
        LoadSpec(concurrency=0)


def test_load_measures_tokens_ttft_and_itl(engine):
    before = endpoint_status(engine.base_url).metrics.ttft_count
    r = run_load(engine.base_url, KEY, MODEL, LoadSpec(requests=12, concurrency=4, prompt_tokens=20, output_tokens=8))
    assert (r.completed, r.errors, r.output_tokens) == (12, 0, 12 * 8)
    assert r.output_tokens_per_s > 0 and r.ttft_ms.p50 is not None and r.itl_ms.p99 >= r.itl_ms.p50
    assert endpoint_status(engine.base_url).metrics.ttft_count == before + 12  # the engine saw every request


def test_errors_are_counted_not_raised(engine):
    r = run_load(engine.base_url, "wrong-key", MODEL, LoadSpec(requests=3, concurrency=2, output_tokens=4))
    assert (r.completed, r.errors) == (0, 3) and "AuthenticationError" in r.error_samples[0]


class StaticDeployer:
    def __init__(self, url):
        self.url = url

    def outputs(self, stack):
        return {"endpoint": OutputValue(self.url)}


def test_cli_bench_writes_json_and_records_tokens_per_replica(cli, engine, tmp_path, monkeypatch):
    monkeypatch.setenv("INFERRY_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("BENCH_API_KEY", KEY)
    from tests.support.progharness import write_stack

    ssh = {"kind": "ssh", "private_key": {"env": "BENCH_API_KEY"}, "gateway": {"host": "h1", "tls": "off"},
           "hosts": [{"address": "10.0.0.2", "name": "h1"},
                     {"address": "10.0.0.3", "name": "h2", "private_address": "10.0.0.3"}]}
    stack = write_stack(tmp_path, "bench", target=ssh, storage_endpoint="http://127.0.0.1:1", env_prefix="BENCH")
    monkeypatch.setattr("cli.lifecycle.make_deployer", lambda: StaticDeployer(engine.base_url))
    r = cli("bench", str(stack), "--requests", "6", "--concurrency", "3", "--output-tokens", "5")
    assert r.exit_code == 0, r.output
    assert "completed 6, errors 0" in r.output and "per replica (2 behind the endpoint)" in r.output
    report = json.loads((tmp_path / "bench" / "bench.json").read_text())
    measured = load_measured_tps("bench")
    assert report["output_tokens"] == 30
    assert measured.tokens_per_second == pytest.approx(report["output_tokens_per_s"] / 2)
    assert measured.details["replicas"] == 2
    r = cli("plan", str(stack), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["tps_source"] == "measured"  # `inferry plan` prices from the bench


def test_cli_bench_with_endpoint_and_key_from_env(cli, engine, tmp_path, monkeypatch):
    monkeypatch.setenv("INFERRY_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("INFERRY_API_KEY", raising=False)

    def no_pulumi():
        raise AssertionError("--endpoint must not read Pulumi outputs")

    monkeypatch.setattr("cli.lifecycle.make_deployer", no_pulumi)
    args = ["bench", "--endpoint", engine.base_url, "--requests", "4", "--concurrency", "2", "--output-tokens", "3"]
    r = cli(*args)
    assert r.exit_code == 1 and "INFERRY_API_KEY is not set" in r.output and "--api-key-env" in r.output
    monkeypatch.setenv("MY_ENGINE_KEY", KEY)
    r = cli(*args, "--api-key-env", "MY_ENGINE_KEY", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)  # --json: the report on stdout, as every command's --json
    assert doc["completed"] == 4 and doc["model"] == MODEL and doc["errors"] == 0
    saved = list((tmp_path / "bench").glob("*.json"))
    assert len(saved) == 1 and json.loads(saved[0].read_text())["completed"] == 4
    r = cli(*args, "--api-key-env", "MY_ENGINE_KEY", "--report", str(tmp_path / "r.json"))
    assert r.exit_code == 0 and "not recorded: no stack named" in r.output
    assert json.loads((tmp_path / "r.json").read_text())["completed"] == 4
