"""`inferry status`: health and live engine metrics parsed from real Prometheus text."""
from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest, start_http_server

from infra.lifecycle.deployer import OutputValue
from infra.lifecycle.status import endpoint_status, histogram_quantile, parse_metrics

# vLLM's TTFT histogram bounds (vllm/v1/metrics/loggers.py).
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)


def vllm_registry(ttfts=(), kv=(0.25, 0.75), running=(3, 1), waiting=(2, 0)) -> CollectorRegistry:
    """Metrics the way vLLM exports them: one label set per engine core."""
    reg = CollectorRegistry()
    labels = ["model_name", "engine"]
    g_kv = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage", labels, registry=reg)
    g_run = Gauge("vllm:num_requests_running", "running", labels, registry=reg)
    g_wait = Gauge("vllm:num_requests_waiting", "waiting", labels, registry=reg)
    h = Histogram("vllm:time_to_first_token_seconds", "TTFT", labels, buckets=TTFT_BUCKETS, registry=reg)
    for i in range(len(kv)):
        lab = ("llama-3.1-8b-instruct", str(i))
        g_kv.labels(*lab).set(kv[i])
        g_run.labels(*lab).set(running[i])
        g_wait.labels(*lab).set(waiting[i])
    for j, t in enumerate(ttfts):
        h.labels("llama-3.1-8b-instruct", str(j % len(kv))).observe(t)
    return reg


def test_histogram_quantile_interpolates_like_prometheus():
    buckets = [(0.1, 50.0), (0.5, 90.0), (1.0, 100.0), (float("inf"), 100.0)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.1)
    assert histogram_quantile(0.7, buckets) == pytest.approx(0.1 + 0.4 * 20 / 40)
    assert histogram_quantile(0.95, buckets) == pytest.approx(0.5 + 0.5 * 5 / 10)
    assert histogram_quantile(0.5, [(0.1, 0.0), (float("inf"), 0.0)]) is None
    assert histogram_quantile(0.99, [(0.1, 1.0), (float("inf"), 10.0)]) == 0.1  # +Inf: highest finite bound


def test_parse_vllm_metrics_sums_engines():
    ttfts = [0.03] * 50 + [0.2] * 45 + [2.0] * 5
    m = parse_metrics(generate_latest(vllm_registry(ttfts)).decode())
    assert m.kv_cache_usage == pytest.approx(0.5)
    assert (m.running, m.waiting, m.ttft_count) == (4, 2, 100)
    assert 0.02 < m.ttft_p50 <= 0.04
    assert 0.1 < m.ttft_p95 <= 0.25


def sglang_registry(ttfts=(), usage=(0.25, 0.75), running=(3, 1), queued=(2, 0)) -> CollectorRegistry:
    """Metrics the way SGLang 0.5.23 exports them with --enable-metrics (observability/metrics_collector.py):
    sglang: names, one label set per data-parallel rank."""
    reg = CollectorRegistry()
    labels = ["model_name", "engine_type", "tp_rank", "pp_rank", "dp_rank"]
    g_use = Gauge("sglang:token_usage", "The token usage.", labels, registry=reg)
    g_run = Gauge("sglang:num_running_reqs", "The number of running requests.", labels, registry=reg)
    g_queue = Gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", labels, registry=reg)
    h = Histogram("sglang:time_to_first_token_seconds", "TTFT", labels[:2], buckets=TTFT_BUCKETS, registry=reg)
    for i in range(len(usage)):
        lab = ("llama", "unified", "0", "0", str(i))
        g_use.labels(*lab).set(usage[i])
        g_run.labels(*lab).set(running[i])
        g_queue.labels(*lab).set(queued[i])
    for t in ttfts:
        h.labels("llama", "unified").observe(t)
    return reg


def test_parse_sglang_metrics_under_its_own_names():
    m = parse_metrics(generate_latest(sglang_registry([0.03] * 9 + [2.0])).decode())
    assert m.kv_cache_usage == pytest.approx(0.5)
    assert (m.running, m.waiting, m.ttft_count) == (4, 2, 10)
    assert 0.02 < m.ttft_p50 <= 0.04


def test_parse_without_requests_or_metrics():
    m = parse_metrics(generate_latest(vllm_registry()).decode())
    assert m.ttft_p50 is None and m.ttft_count == 0
    empty = parse_metrics("")
    assert (empty.kv_cache_usage, empty.running, empty.waiting) == (None, None, None)


@pytest.fixture
def metrics_server():
    server, thread = start_http_server(0, addr="127.0.0.1", registry=vllm_registry([0.05] * 10))
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join(5)


def test_endpoint_status_reads_a_live_endpoint(metrics_server):
    s = endpoint_status(metrics_server + "/v1")
    assert s.healthy and s.metrics.running == 4 and s.metrics.ttft_count == 10
    text = "\n".join(s.lines())
    assert "KV cache: 50.0%" in text and "running: 4" in text and "p50 50 ms" in text


def test_endpoint_status_of_a_dead_endpoint():
    s = endpoint_status("http://127.0.0.1:9", timeout=1)
    assert not s.healthy and s.metrics is None
    assert "NOT HEALTHY" in s.lines()[0] and "answered nothing" in s.lines()[1]


class StaticDeployer:
    """A Deployer whose stack is already up at known endpoints."""

    def __init__(self, **outputs):
        self.values = {k: OutputValue(v) for k, v in outputs.items()}

    def outputs(self, stack):
        return self.values


def inside(metrics_server, monkeypatch) -> list:
    """The SSH target's metrics reads answered with the metrics server's text (as curl on a host would)."""
    from infra.lifecycle import probe
    from infra.targets.contract import MetricsRead

    calls: list = []
    text = probe.get(metrics_server.removesuffix("/v1") + "/metrics", 3)[1]
    reads = [MetricsRead("host gpu-1", text), MetricsRead("host gpu-2", None, "not read: host unreachable")]
    monkeypatch.setattr("infra.targets.ssh.target.Ssh.engine_metrics",
                        lambda self, stack, resolve: calls.append(stack.name) or reads)
    monkeypatch.setattr("infra.targets.ssh.target.Ssh.host_status", lambda self, stack, resolve: [])
    return calls


def test_cli_status_reads_each_engine_from_inside_on_ssh_targets(cli, monkeypatch, metrics_server):
    import json

    calls = inside(metrics_server, monkeypatch)
    monkeypatch.setattr("cli.lifecycle.make_deployer", lambda: StaticDeployer(endpoint=metrics_server))
    r = cli("status", "eu-ssh")
    assert r.exit_code == 0 and calls == ["eu-ssh"], r.output
    lines = r.output.splitlines()
    assert lines[0] == f"{metrics_server}  healthy" and lines[1] == "host gpu-1 engine metrics:", r.output
    assert "waiting: 2" in lines[2] and lines[4] == "host gpu-2 engine metrics: not read: host unreachable"
    doc = json.loads(cli("status", "eu-ssh", "--json").output)
    assert doc["endpoints"][0]["metrics"] is None and doc["replicas"][0]["metrics"]["waiting"] == 2
    assert doc["replicas"][1] == {"source": "host gpu-2", "metrics": None, "error": "not read: host unreachable",
                                 "at_zero": False}


def test_cli_status(cli, monkeypatch, metrics_server):
    inside(metrics_server, monkeypatch)
    monkeypatch.setattr("cli.lifecycle.make_deployer", lambda: StaticDeployer(endpoint=metrics_server))
    r = cli("status", "eu-ssh")
    assert r.exit_code == 0, r.output
    assert f"{metrics_server}  healthy" in r.output and "waiting: 2" in r.output
    monkeypatch.setattr("cli.lifecycle.make_deployer",
                        lambda: StaticDeployer(endpoints=[metrics_server, "http://127.0.0.1:9"]))
    r = cli("status", "eu-ssh")
    assert r.exit_code == 1 and "http://127.0.0.1:9  NOT HEALTHY" in r.output
    monkeypatch.setattr("cli.lifecycle.make_deployer", lambda: StaticDeployer())
    r = cli("status", "eu-ssh")
    assert r.exit_code == 1 and "exports no endpoint" in r.output and "inferry up eu-ssh" in r.output


def test_json_iteration_stats_are_named_not_misparsed():
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class TrtllmLike(BaseHTTPRequestHandler):
        def do_GET(self):  # trtllm-serve: /health 200, /metrics a JSON list of iteration stats
            body = b"" if self.path == "/health" else json.dumps([{"iter": 1, "gpuMemUsage": 1}]).encode()
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), TrtllmLike)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        s = endpoint_status(f"http://127.0.0.1:{server.server_port}/v1")
    finally:
        server.shutdown()
    assert s.healthy and s.metrics is None and "JSON iteration statistics" in s.lines()[1]


def test_status_with_endpoint_needs_no_stack_or_pulumi(cli, monkeypatch, metrics_server):
    import json

    def no_pulumi():
        raise AssertionError("--endpoint must not read Pulumi outputs")

    monkeypatch.setattr("cli.lifecycle.make_deployer", no_pulumi)
    r = cli("status", "--endpoint", metrics_server)
    assert r.exit_code == 0, r.output
    assert f"{metrics_server}  healthy" in r.output and "running: 4" in r.output
    r = cli("status", "--endpoint", metrics_server, "--endpoint", "http://127.0.0.1:9", "--json")
    assert r.exit_code == 1
    doc = json.loads(r.output)
    assert [e["healthy"] for e in doc["endpoints"]] == [True, False] and doc["healthy"] is False
    assert doc["endpoints"][0]["metrics"]["running"] == 4 and doc["endpoints"][1]["metrics"] is None
    r = cli("status", "--endpoint", "not a url")
    assert r.exit_code == 1 and "--endpoint" in r.output and "Traceback" not in r.output
    r = cli("status")
    assert r.exit_code == 1 and "pass STACK" in r.output and "--endpoint URL" in r.output


def test_a_host_whose_engine_is_down_is_named_with_the_command_that_starts_it():
    from infra.targets.ssh.status import EngineState

    down = EngineState("gpu-1", "stopped", 0, "2026-12-01T10:00:00Z").line("prod")
    assert down == ("host gpu-1: engine stopped (last started 2026-12-01T10:00:00Z); "
                    "run `inferry up prod` to start it again")
    assert "run `" not in EngineState("gpu-1", "running", 1, "2026-12-01T10:00:00Z").line("prod")
    assert "run `" not in EngineState("gpu-1", "restarting", 3, "").line("prod")  # Docker's restart policy at work
