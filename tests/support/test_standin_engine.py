"""The stand-in engine takes the engines' real command lines (from infra/engines) and answers like vLLM."""
from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.error
import urllib.request

import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from infra.stack.config_engines import TrtllmEngine
from infra.engines import service_spec
from infra.stack.stackfile import load_stack
from tests.conftest import ROOT
from tests.support.hosts.fixtures import ssh_connect
from tests.support.standin.process import RunningEngine, command, free_port, start_engine

KEY = "sk-standin-test"
ENV = {"PYTHONPATH": str(ROOT)}


def example_spec(model_dir: str, engine: str = "vllm"):
    """The ServiceSpec infra/engines renders for the eu-ssh example stack (or its TensorRT-LLM variant)."""
    d = load_stack(ROOT / "stacks" / "Pulumi.eu-ssh.yaml").deployment
    if engine == "tensorrt-llm":
        d = d.model_copy(update={"engine": TrtllmEngine(kind="tensorrt-llm", max_model_len=32768)})
    return service_spec(d, model_dir)


def relocated(argv: tuple[str, ...], host: str, port: int) -> list[str]:
    """argv with its --host/--port values replaced (local tests share one network namespace)."""
    out = list(argv)
    for flag, value in (("--host", host), ("--port", str(port))):
        out[out.index(flag) + 1] = value
    return out


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "llama"
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    return path


@pytest.fixture(scope="module")
def engine(model_dir, tmp_path_factory):
    log = tmp_path_factory.mktemp("engine") / "engine.log"
    spec = example_spec(str(model_dir))
    assert spec.command == ("vllm", "serve") and [e.name for e in spec.env if e.secret_field] == ["VLLM_API_KEY"]
    eng = start_engine(["serve", *relocated(spec.args, "127.0.0.1", free_port())], log, env={"VLLM_API_KEY": KEY})
    yield eng
    eng.stop()


def get(url: str, key: str | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_standin_refuses_an_unknown_flag_like_the_engine(model_dir):
    out = subprocess.run(command("vllm", "serve", str(model_dir), "--max-model-len", "4096", "--bogus-flag"),
                         capture_output=True, text=True, env=ENV)
    assert out.returncode == 2
    assert "vllm serve: error:" in out.stderr and "--bogus-flag" in out.stderr


def test_standin_refuses_a_bad_value_and_a_missing_model(tmp_path, model_dir):
    env = ENV
    bad = subprocess.run(command("vllm", "serve", str(model_dir), "--max-model-len", "lots"),
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "--max-model-len" in bad.stderr
    missing = subprocess.run(command("vllm", "serve", str(tmp_path / "nothing")), capture_output=True, text=True,
                             env=env)
    assert missing.returncode == 1 and "nothing" in missing.stderr
    (tmp_path / "empty").mkdir()
    empty = subprocess.run(command("vllm", "serve", str(tmp_path / "empty")), capture_output=True, text=True,
                           env=env)
    assert empty.returncode == 1 and "config.json" in empty.stderr


def test_s3_models_need_the_streaming_loader(tmp_path):
    args = ["serve", "s3://weights/llama", "--host", "127.0.0.1", "--port", str(free_port())]
    streamed = start_engine([*args, "--load-format", "runai_streamer"], tmp_path / "s3.log")
    streamed.stop()
    local = subprocess.run(command("vllm", *args, "--load-format", "safetensors"), capture_output=True, text=True,
                           env=ENV)
    assert local.returncode == 1 and "runai_streamer" in local.stderr


def test_api_key_guards_v1_only_like_vllm(engine):
    assert get(f"{engine.base_url}/v1/models") == (401, b'{"error":"Unauthorized"}')
    assert get(f"{engine.base_url}/v1/models", key="wrong")[0] == 401
    assert get(f"{engine.base_url}/health") == (200, b"")
    assert get(f"{engine.base_url}/metrics")[0] == 200
    status, body = get(f"{engine.base_url}/v1/models", key=KEY)
    assert status == 200 and [m["id"] for m in json.loads(body)["data"]] == ["llama-3.1-8b-instruct"]
    assert json.loads(get(f"{engine.base_url}/version")[1]) == {"version": "0.33.0"}


def test_chat_completion_through_the_openai_client(engine):
    client = openai.OpenAI(base_url=f"{engine.base_url}/v1", api_key=KEY)
    reply = client.chat.completions.create(model="llama-3.1-8b-instruct",
                                           messages=[{"role": "user", "content": "say hello"}])
    assert reply.choices[0].message.content == "stand-in reply to: say hello"
    assert reply.usage.completion_tokens == 5 and reply.choices[0].finish_reason == "stop"
    stream = client.chat.completions.create(model="llama-3.1-8b-instruct", stream=True, max_tokens=3,
                                            stream_options={"include_usage": True},
                                            messages=[{"role": "user", "content": "say hello"}])
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "stand-in reply to:"
    assert chunks[-1].usage.completion_tokens == 3
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{engine.base_url}/v1", api_key="wrong").models.list()
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="other", messages=[{"role": "user", "content": "x"}])


def test_metrics_parse_with_prometheus_client(engine):
    client = openai.OpenAI(base_url=f"{engine.base_url}/v1", api_key=KEY)
    client.chat.completions.create(model="llama-3.1-8b-instruct", messages=[{"role": "user", "content": "a b"}])
    families = {f.name: f for f in text_string_to_metric_families(get(f"{engine.base_url}/metrics")[1].decode())}
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
        assert families[name].type == "gauge"
    assert families["vllm:generation_tokens"].type == "counter"
    samples = {s.name: s for f in families.values() for s in f.samples}
    assert samples["vllm:generation_tokens_total"].value >= 5
    assert samples["vllm:generation_tokens_total"].labels == {"engine": "0", "model_name": "llama-3.1-8b-instruct"}
    assert families["vllm:time_to_first_token_seconds"].type == "histogram"
    assert samples["vllm:e2e_request_latency_seconds_count"].value >= 1


def test_requests_past_max_num_seqs_wait_and_are_counted_as_waiting(model_dir, tmp_path):
    """vLLM's scheduler runs at most --max-num-seqs requests at once; the rest are num_requests_waiting (the
    gauge the autoscaler follows) until a place frees, and their wait lands in request_queue_time_seconds."""
    args = ["serve", str(model_dir), "--host", "127.0.0.1", "--port", str(free_port()), "--max-num-seqs", "1"]
    eng = start_engine(args, tmp_path / "q.log", env={"INFERRY_STANDIN_TOKEN_S": "0.2"})
    body = json.dumps({"model": str(model_dir), "messages": [{"role": "user", "content": "x"}]}).encode()

    def gauges() -> dict[str, float]:
        text = get(f"{eng.base_url}/metrics")[1].decode()
        return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}

    def chat() -> None:
        req = urllib.request.Request(f"{eng.base_url}/v1/chat/completions", data=body,
                                     headers={"content-type": "application/json"})
        urllib.request.urlopen(req, timeout=30).read()

    try:
        threads = [threading.Thread(target=chat) for _ in range(3)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 5
        while (g := gauges())["vllm:num_requests_waiting"] < 2:
            assert time.monotonic() < deadline, g
            time.sleep(0.02)
        assert g["vllm:num_requests_running"] == 1
        for t in threads:
            t.join(30)
        # The last answer reaches the client a moment before the engine counts it done (vLLM's gauges, too, lag
        # the response): wait for the count to settle instead of reading it at once.
        deadline = time.monotonic() + 10
        while ((g := gauges())["vllm:num_requests_waiting"], g["vllm:num_requests_running"]) != (0, 0):
            assert time.monotonic() < deadline, g
            time.sleep(0.02)
        assert g["vllm:request_queue_time_seconds_count"] == 3
        assert g["vllm:request_queue_time_seconds_sum"] > 0.5  # two waited for one or two 0.8 s answers
    finally:
        eng.stop()


def test_never_healthy_and_crash_knobs(model_dir, tmp_path):
    args = ["serve", str(model_dir), "--host", "127.0.0.1", "--port", str(free_port())]
    sick = start_engine(args, tmp_path / "sick.log", env={"INFERRY_STANDIN_NEVER_HEALTHY": "1"}, wait_status=503)
    try:
        assert "ERROR" in sick.log and get(f"{sick.base_url}/v1/models")[0] == 200
    finally:
        sick.stop()
    slow = start_engine(args, tmp_path / "slow.log", env={"INFERRY_STANDIN_STARTUP_S": "600"}, wait_status=None)
    try:
        while "Loading weights" not in slow.log:
            time.sleep(0.01)
        assert slow.health(timeout=0.3) == 0  # bound but not serving yet, as vLLM while it loads
        assert "startup complete" not in slow.log
    finally:
        slow.proc.kill()
        slow.proc.wait()
    crash = subprocess.run(command("vllm", *args), capture_output=True, text=True,
                           env={**ENV, "INFERRY_STANDIN_CRASH": "OOM"})
    assert crash.returncode == 1 and "EngineCore failed to start: OOM" in crash.stdout


def test_trtllm_serve_standin_takes_the_rendered_command_line(model_dir, tmp_path):
    spec = example_spec(str(model_dir), engine="tensorrt-llm")
    assert spec.command == ("trtllm-serve",)
    eng = start_engine(relocated(spec.args, "127.0.0.1", free_port()), tmp_path / "trt.log", program="trtllm-serve")
    try:
        assert get(f"{eng.base_url}/v1/models")[0] == 200  # trtllm-serve has no API key of its own
    finally:
        eng.stop()
    bad = subprocess.run(command("trtllm-serve", str(model_dir), "--tensor-parallel-size", "1"),
                         capture_output=True, text=True, env=ENV)
    assert bad.returncode == 2 and "--tensor-parallel-size" in bad.stderr


def test_trtllm_config_yaml_is_checked_against_the_snapshot(model_dir, tmp_path):
    d = load_stack(ROOT / "stacks" / "Pulumi.eu-ssh.yaml").deployment
    engine = TrtllmEngine(kind="tensorrt-llm", max_model_len=32768, enable_block_reuse=True, max_batch_size=16)
    spec = service_spec(d.model_copy(update={"engine": engine}), str(model_dir))
    (config,) = spec.files
    args = relocated(spec.args, "127.0.0.1", free_port())
    args[args.index("--config") + 1] = str(tmp_path / config.name)
    (tmp_path / config.name).write_text(config.content)
    eng = start_engine(args, tmp_path / "trt.log", program="trtllm-serve")
    eng.stop()
    (tmp_path / config.name).write_text(config.content + "no_such_option: 1\n")
    bad = subprocess.run(command("trtllm-serve", *args), capture_output=True, text=True, env=ENV)
    assert bad.returncode == 1 and "no_such_option" in bad.stderr


def test_rendered_engine_on_a_test_host_serves_the_test_machine(host_network):
    host = host_network.add_host("engine1")
    try:
        spec = example_spec("/root/models/llama")
        with ssh_connect(host) as client:
            _, out, _ = client.exec_command(
                "mkdir -p /root/models/llama && echo '{}' > /root/models/llama/config.json && "
                f"VLLM_API_KEY={KEY} nohup {' '.join(spec.argv)} > /root/engine.log 2>&1 &")
            assert out.channel.recv_exit_status() == 0
        remote = RunningEngine(proc=None, base_url=f"http://{host.address}:{spec.port}",
                               log_path=host.path("/root/engine.log"))
        deadline = time.monotonic() + 30
        while remote.health() != 200:
            assert time.monotonic() < deadline, remote.log
            time.sleep(0.05)
        client = openai.OpenAI(base_url=f"{remote.base_url}/v1", api_key=KEY)
        reply = client.chat.completions.create(model=spec.served_model_name,
                                               messages=[{"role": "user", "content": "ping"}])
        assert reply.choices[0].message.content == "stand-in reply to: ping"
        assert "vllm serve /root/models/llama" in host.exec("ps ax -o args").stdout
        assert [start["argv"] for start in host.engine_starts()] == [list(spec.argv)]
    finally:
        host_network.remove_host(host)


def test_host_knobs_reach_engines_started_over_ssh(make_hosts):
    (host,) = make_hosts(1, gpu_count=1)
    spec = example_spec("/root/m")
    host.exec("mkdir -p /root/m && echo '{}' > /root/m/config.json", check=True)
    too_wide = host.exec(f"{' '.join(spec.argv)} --tensor-parallel-size 2")
    assert too_wide.returncode == 1 and "exceeds the total number of available GPUs (1)" in too_wide.stdout
    host.set_standin(crash="CUDA out of memory")
    with ssh_connect(host) as client:
        _, out, _ = client.exec_command(" ".join(spec.argv))
        assert out.channel.recv_exit_status() == 1
        assert "EngineCore failed to start: CUDA out of memory" in out.read().decode()
