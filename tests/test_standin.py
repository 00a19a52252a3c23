"""The stand-in nvidia-smi and engine: real captures byte for byte, the engine's real command line and API."""
from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request

import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.hosts.fixtures import ssh_connect
from tests.standin import nvidia_smi
from tests.standin.process import RunningEngine, command, free_port, start_engine

KEY = "sk-standin-test"
ENV = {"PYTHONPATH": str(nvidia_smi.FIXTURES.parents[3])}
# What infra/engines renders for the example stacks (vLLM 0.33 flags), plus host/port.
REAL_VLLM_ARGS = ["--served-model-name", "llama-3.1-8b-instruct", "--max-model-len", "32768",
                  "--gpu-memory-utilization", "0.9", "--quantization", "fp8", "--tensor-parallel-size", "1",
                  "--enable-prefix-caching", "--host", "127.0.0.1"]
CAPTURES = {  # capture file -> nvidia-smi arguments it was taken with
    "smi_plain.txt": "", "smi_L.txt": "-L", "smi_version.txt": "--version", "smi_q.xml": "-q -x",
    "smi_topo.txt": "topo -m",
    "smi_query.txt": "--query-gpu=index,name,uuid,memory.total,memory.used,memory.free,driver_version,"
                     "compute_cap,pci.bus_id,power.limit,clocks.max.sm --format=csv",
    "smi_query_nounits.txt": "--query-gpu=index,name,memory.total,driver_version,compute_cap "
                             "--format=csv,noheader,nounits",
}


@pytest.fixture(scope="module")
def gpu_host(host_network):
    host = host_network.add_host("gpu1")
    yield host
    host_network.remove_host(host)


def test_captures_command_lines_match_the_table():
    for name, args in CAPTURES.items():
        first = (nvidia_smi.FIXTURES / name).read_text().splitlines()[0]
        assert first in (f"$ nvidia-smi {args}".rstrip(), "<?xml version=\"1.0\" ?>")


@pytest.mark.parametrize("capture", sorted(CAPTURES))
def test_nvidia_smi_on_a_host_prints_the_capture_byte_for_byte(gpu_host, capture):
    out = subprocess.run(["nsenter", "-t", str(gpu_host.init_pid), "-m", "-u", "-n", "-p", "--",
                          "/usr/local/bin/nvidia-smi", *CAPTURES[capture].split()], capture_output=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == nvidia_smi.capture(capture).encode()


def test_nvidia_smi_over_ssh_uses_the_host_private_tool(gpu_host):
    with ssh_connect(gpu_host) as client:
        _, out, _ = client.exec_command("command -v nvidia-smi; nvidia-smi -L")
        assert out.read().decode() == "/usr/local/bin/nvidia-smi\n" + nvidia_smi.capture("smi_L.txt")


def test_h100_host_with_two_gpus(make_hosts):
    (host,) = make_hosts(1, gpu="h100", gpu_count=2)
    listing = host.exec("nvidia-smi -L").stdout.splitlines()
    assert [line.split(" (UUID")[0] for line in listing] == ["GPU 0: NVIDIA H100 80GB HBM3",
                                                             "GPU 1: NVIDIA H100 80GB HBM3"]
    assert len({line.split("UUID: ")[1] for line in listing}) == 2
    csv = host.exec("nvidia-smi --query-gpu=index,name,memory.total,compute_cap --format=csv").stdout
    assert csv == ("index, name, memory.total [MiB], compute_cap\n0, NVIDIA H100 80GB HBM3, 81559 MiB, 9.0\n"
                   "1, NVIDIA H100 80GB HBM3, 81559 MiB, 9.0\n")
    assert host.exec("nvidia-smi -q -x").stdout.count("<product_name>NVIDIA H100 80GB HBM3<") == 2
    assert host.exec("nvidia-smi").stdout.count("NVIDIA H100 80GB HBM3") == 2


def test_nvidia_smi_refuses_an_unknown_field(gpu_host):
    out = gpu_host.exec("nvidia-smi --query-gpu=name,bogus --format=csv")
    assert out.returncode == 2 and out.stdout.startswith('Field "bogus" is not a valid field to query.')


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "llama"
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    return path


@pytest.fixture(scope="module")
def engine(model_dir, tmp_path_factory):
    log = tmp_path_factory.mktemp("engine") / "engine.log"
    eng = start_engine(["serve", str(model_dir), *REAL_VLLM_ARGS, "--port", str(free_port())], log,
                       env={"VLLM_API_KEY": KEY})
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


def test_api_key_guards_v1_only_like_vllm(engine):
    assert get(f"{engine.base_url}/v1/models") == (401, b'{"error": "Unauthorized"}')
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


def test_never_healthy_and_crash_knobs(model_dir, tmp_path):
    args = ["serve", str(model_dir), "--host", "127.0.0.1", "--port", str(free_port())]
    sick = start_engine(args, tmp_path / "sick.log", env={"INFERRY_STANDIN_NEVER_HEALTHY": "1"}, wait_status=503)
    try:
        assert "ERROR" in sick.log and get(f"{sick.base_url}/v1/models")[0] == 200
    finally:
        sick.stop()
    crash = subprocess.run(command("vllm", *args), capture_output=True, text=True,
                           env={**ENV, "INFERRY_STANDIN_CRASH": "OOM"})
    assert crash.returncode == 1 and "EngineCore failed to start: OOM" in crash.stdout


def test_trtllm_serve_standin_takes_its_own_flags(model_dir, tmp_path):
    args = [str(model_dir), "--backend", "pytorch", "--host", "127.0.0.1", "--port", str(free_port()),
            "--max_batch_size", "8", "--tp_size", "1"]
    eng = start_engine(args, tmp_path / "trt.log", program="trtllm-serve")
    try:
        assert get(f"{eng.base_url}/v1/models")[0] == 200  # trtllm-serve has no API key of its own
    finally:
        eng.stop()
    bad = subprocess.run(command("trtllm-serve", str(model_dir), "--tensor-parallel-size", "1"),
                         capture_output=True, text=True, env=ENV)
    assert bad.returncode == 2 and "--tensor-parallel-size" in bad.stderr


def test_engine_on_a_test_host_serves_the_test_machine(gpu_host):
    with ssh_connect(gpu_host) as client:
        _, out, _ = client.exec_command(
            "mkdir -p /root/m && echo '{}' > /root/m/config.json && "
            f"VLLM_API_KEY={KEY} nohup vllm serve /root/m --served-model-name tiny --port 8000 "
            "> /root/engine.log 2>&1 &")
        assert out.channel.recv_exit_status() == 0
    remote = RunningEngine(proc=None, base_url=f"http://{gpu_host.address}:8000",
                           log_path=gpu_host.path("/root/engine.log"))
    deadline = time.monotonic() + 30
    while remote.health() != 200:
        assert time.monotonic() < deadline, remote.log
        time.sleep(0.05)
    reply = openai.OpenAI(base_url=f"{remote.base_url}/v1", api_key=KEY).chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "ping"}])
    assert reply.choices[0].message.content == "stand-in reply to: ping"
    assert "vllm" in gpu_host.exec("ps ax -o args").stdout
