"""A real Prometheus (built by scripts/tools.sh) in the real node's network, scraping what a ServiceMonitor names.

It runs where a cluster's Prometheus would: on the pod network (the node's network namespace), discovering
the Service's endpoints from the API server (kubernetes_sd, role endpointslice). Its scrape config is the one
the Prometheus operator writes for a ServiceMonitor: keep the endpoints of Services whose labels match the
selector and whose port has the endpoint's name, scrape its path, and label each series with namespace,
service, pod and endpoint (the labels the rendered KEDA query filters on). The interval is shortened to 2 s so
that a test sees a queue within seconds (the rendered ServiceMonitor says 15 s).
"""
from __future__ import annotations

import json
import re
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from tests.support.daemons import stop, wait_http
from tests.support.realengine import TOOLS_BIN

PORT = 9090


def prometheus_binary() -> str:
    """The server; fails loudly when it is missing (no skip)."""
    binary = TOOLS_BIN / "prometheus"
    if not binary.exists():
        raise RuntimeError("the autoscaling tests need Prometheus: run `bash scripts/tools.sh cluster`")
    return str(binary)


def _label(name: str) -> str:
    """A Kubernetes label name as Prometheus's service discovery spells it in meta labels."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def scrape_config(monitor: dict, namespace: str, kubeconfig: Path) -> dict:
    """The Prometheus operator's translation of one ServiceMonitor endpoint (the first)."""
    spec, endpoint = monitor["spec"], monitor["spec"]["endpoints"][0]
    keep = [{"action": "keep", "source_labels": [f"__meta_kubernetes_service_label_{_label(k)}"], "regex": v}
            for k, v in spec["selector"]["matchLabels"].items()]
    keep.append({"action": "keep", "source_labels": ["__meta_kubernetes_endpointslice_port_name"],
                 "regex": endpoint["port"]})
    labels = [{"source_labels": [f"__meta_kubernetes_{src}"], "target_label": dst}
              for src, dst in (("namespace", "namespace"), ("service_name", "service"), ("pod_name", "pod"))]
    return {"job_name": f"serviceMonitor/{namespace}/{monitor['metadata']['name']}/0",
            "scrape_interval": "2s", "metrics_path": endpoint.get("path", "/metrics"),
            "kubernetes_sd_configs": [{"role": "endpointslice", "kubeconfig_file": str(kubeconfig),
                                       "namespaces": {"names": [namespace]}}],
            "relabel_configs": keep + labels + [{"target_label": "endpoint", "replacement": endpoint["port"]}]}


class Prometheus:
    """The running server: its URL from this machine, and queries."""

    def __init__(self, url: str, proc: subprocess.Popen, log: Path):
        self.url, self.proc, self.log = url, proc, log

    def query(self, promql: str) -> list[dict]:
        """An instant query's result vector."""
        q = urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{q}", timeout=10) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]["result"]

    def targets_up(self) -> int:
        """How many scrape targets answered their last scrape."""
        with urllib.request.urlopen(f"{self.url}/api/v1/targets", timeout=10) as r:
            active = json.loads(r.read())["data"]["activeTargets"]
        return sum(1 for t in active if t["health"] == "up")


@contextmanager
def prometheus_on_node(node, monitor: dict, namespace: str, folder: Path) -> Iterator[Prometheus]:
    """Prometheus in the node's network scraping what `monitor` (a rendered ServiceMonitor) selects; stopped at
    the end. Reached from this machine at the node's address."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {"global": {"scrape_interval": "2s", "evaluation_interval": "2s"},
              "scrape_configs": [scrape_config(monitor, namespace, node.lay.run / "kubeconfig")]}
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
    log = folder / "prometheus.log"
    argv = ["nsenter", f"--net=/run/netns/{node.lay.netns}", prometheus_binary(),
            f"--config.file={folder / 'prometheus.yml'}", f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address={node.lay.address}:{PORT}"]
    with open(log, "wb") as out:  # the child keeps its own descriptor
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://{node.lay.address}:{PORT}"
    try:
        wait_http(f"{url}/-/ready", proc, log, "Prometheus")
        yield Prometheus(url, proc, log)
    finally:
        stop(proc)
