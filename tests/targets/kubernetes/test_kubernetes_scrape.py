"""A KEDA Prometheus trigger needs Prometheus to scrape the engine: refused without it, the ServiceMonitor with it."""
from __future__ import annotations

import pytest
import yaml

from infra.errors import ConfigError
from infra.stack.stackfile import parse_deployment
from infra.targets.kubernetes.checks import refuse_broken_scaling
from infra.targets.kubernetes.manifests import objects
from tests.conftest import STACKS
from tests.support.kubernetes_stacks import deployment, raw_deployment, spec_of


def _with_target(**change):
    d = raw_deployment()
    d["target"] = {**d["target"], **change}
    return d


def test_keda_trigger_without_a_scrape_is_refused_by_validate_and_render(cli, tmp_path):
    doc = yaml.safe_load(STACKS[0].read_text())
    doc["config"]["inferry:deployment"]["target"]["service_monitor"] = False
    path = tmp_path / "Pulumi.noscrape.yaml"
    path.write_text(yaml.safe_dump(doc))
    for args in (["validate", str(path)], ["render", str(path), "--out", str(tmp_path / "out")]):
        r = cli(*args)
        assert r.exit_code == 1, r.output
        text = " ".join(r.output.split())
        assert "target.service_monitor: the KEDA Prometheus trigger" in text and "Traceback" not in text
        assert "set target.service_monitor: true" in text
    assert not (tmp_path / "out").exists()  # nothing rendered
    with pytest.raises(ConfigError):  # `inferry up` runs deploy(), which refuses the same way
        refuse_broken_scaling(parse_deployment(_with_target(service_monitor=False), "test"))
    refuse_broken_scaling(parse_deployment(_with_target(service_monitor=True), "test"))  # the printed fix passes


def test_the_bundled_keda_stack_renders_a_monitor_that_scrapes_what_keda_queries():
    d = deployment("bundled")
    manifests = objects(d, spec_of(d), "test")
    [scaled] = [m for m in manifests if m["kind"] == "ScaledObject"]
    engine = [m for m in manifests if not m["metadata"]["name"].endswith("-gateway")]  # the gateway has its own
    [monitor] = [m for m in engine if m["kind"] == "ServiceMonitor"]
    [service] = [m for m in engine if m["kind"] == "Service"]
    assert "vllm:num_requests_waiting" in scaled["spec"]["triggers"][0]["metadata"]["query"]
    labels = service["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in monitor["spec"]["selector"]["matchLabels"].items())
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics" and endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}


def test_no_prometheus_trigger_needs_no_monitor():
    d = parse_deployment(_with_target(service_monitor=False, autoscaling=None), "test")
    assert "ServiceMonitor" not in {m["kind"] for m in objects(d, spec_of(d), "test")}


def test_scale_to_zero_scrapes_the_gateway_not_the_engine():
    d = parse_deployment(_with_target(service_monitor=False, gateway={"hold_s": 300}, autoscaling={
        "engine": "keda", "min_replicas": 0, "max_replicas": 2, "scale_to_zero": True}), "test")
    (monitor,) = [m for m in objects(d, spec_of(d), "test") if m["kind"] == "ServiceMonitor"]
    assert monitor["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "gateway"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
