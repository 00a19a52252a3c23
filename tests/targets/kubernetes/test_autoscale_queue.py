"""Autoscaling for real, on the real node, driven by the engine's own queue: the engine in its pod queues the
requests past its batch (`max_num_seqs: 1`, answers slowed by the model's stand-in knobs), a real Prometheus
scrapes the pod as the stack's ServiceMonitor says, the stack's KEDA query (read back from the cluster's
ScaledObject) returns that queue, KEDA's real operator marks the ScaledObject Active while requests wait, and
the HPA it made, fed by KEDA's real metrics adapter through the API server's aggregation layer, takes the
Deployment from min_replicas to max_replicas and, once the queue drained and cooldown_s passed, back.
"""
from __future__ import annotations

import json
import threading
import time

import pytest

from tests.support.keda import keda_operator
from tests.support.pods import API_KEY, MODEL, NAME, SECRETS, on_the_node, push, store  # noqa: F401
from tests.support.prometheus import PORT, prometheus_on_node
from tests.support.realengine import Project
from tests.support.storage_util import make_model

pytestmark = pytest.mark.cluster
NS = "pods-queue"
REQUESTS = 12  # one at a time, 4 s each ("stand-in reply to: hi" is 4 tokens at 1 s): the last waits ~44 s
COOLDOWN_S = 15


def send(node, ip: str, results: list) -> None:
    """One chat completion through the Service from the node's network; its HTTP status into results."""
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
    r = node.netns_exec("curl", "-sS", "-m", "90", "-o", "/dev/null", "-w", "%{http_code}", "-H",
                        "Content-Type: application/json", "-H", f"Authorization: Bearer {API_KEY}", "-d", body,
                        f"http://{ip}:8000/v1/chat/completions", timeout=120, check=False)
    results.append(r.stdout.strip())


def active(cluster) -> str:
    """The ScaledObject's Active condition as KEDA last set it ("True", "False" or "" before it has)."""
    conditions = (cluster.get("scaledobject", NAME, NS).get("status") or {}).get("conditions", [])
    return {c["type"]: c["status"] for c in conditions}.get("Active", "")


def until(check, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(1)


def replicas(cluster) -> tuple[int, int]:
    """(spec.replicas, ready replicas) of the engine's Deployment."""
    dep = cluster.get("deployment", NAME, NS)
    return dep["spec"]["replicas"], dep["status"].get("readyReplicas", 0)


def watch_the_queue(project, node, cluster, url: str, tmp_path) -> dict:
    """`inferry up`, then requests past the batch: their statuses, the queue Prometheus saw each second, the
    Active states KEDA set and the Deployment's (replicas, ready) meanwhile, and the queue after."""
    r = project.inferry("up", "queue", timeout=600, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    trigger = cluster.get("scaledobject", NAME, NS)["spec"]["triggers"][0]["metadata"]
    assert trigger["serverAddress"] == url
    with prometheus_on_node(node, cluster.get("servicemonitor", NAME, NS), NS, tmp_path / "prom") as prom:
        until(lambda: prom.targets_up() == 1, "Prometheus never scraped the pod")
        until(lambda: prom.query(trigger["query"]), "the stack's query found no series")
        assert float(prom.query(trigger["query"])[0]["value"][1]) == 0
        until(lambda: active(cluster) == "False", "KEDA never evaluated the trigger")
        ip = cluster.get("service", NAME, NS)["spec"]["clusterIP"]
        results: list[str] = []
        clients = [threading.Thread(target=send, args=(node, ip, results)) for _ in range(REQUESTS)]
        for c in clients:
            c.start()
        seen: dict = {"queue": [], "active": set(), "replicas": []}
        while any(c.is_alive() for c in clients):
            seen["queue"].append(float(prom.query(trigger["query"])[0]["value"][1]))
            seen["active"].add(active(cluster))
            seen["replicas"].append(replicas(cluster))
            time.sleep(1)
        until(lambda: active(cluster) == "False", "KEDA still active after the queue drained", timeout=60)

        def scaled_in() -> bool:
            seen["replicas"].append(replicas(cluster))
            return seen["replicas"][-1][0] == 1

        # scaling in: the HPA's stabilization window (cooldown_s) plus its 15 s sync period
        until(scaled_in, "never scaled back in", timeout=COOLDOWN_S + 90)
        return {**seen, "results": results, "drained": float(prom.query(trigger["query"])[0]["value"][1])}


def test_the_engines_queue_reaches_prometheus_and_keda_through_the_stacks_own_objects(node, cluster, store,
                                                                                       tmp_path, installed):
    model = tmp_path / "slow"
    make_model(model, shards=(1 << 20,))
    (model / "inferry-standin.env").write_text("INFERRY_STANDIN_TOKEN_S=1\n")  # each token takes 1 s
    push(store, model, "slow-model")
    url = f"http://{node.lay.address}:{PORT}"
    d = on_the_node(cluster, store, NS, service_monitor=True, autoscaling={
        "engine": "keda", "min_replicas": 1, "max_replicas": 2, "queue_target": 1, "prometheus_url": url,
        "cooldown_s": COOLDOWN_S})
    d["model"].update(weights="slow-model")
    d["engine"].update(max_num_seqs=1)
    project = Project(tmp_path / "project", installed[1])
    project.write_stack("queue", d, SECRETS)
    # KEDA runs until the stack is destroyed: it takes its finalizer off the ScaledObject, which else stays.
    with keda_operator(cluster, NS, tmp_path, adapter_ip=node.lay.gateway):
        try:
            seen = watch_the_queue(project, node, cluster, url, tmp_path)
        finally:
            project.pulumi("destroy", "--yes", "--stack", "queue", check=False, timeout=600)
    cluster.kubectl("delete", "namespace", NS, "--wait=false", check=False)
    queue, scale = seen["queue"], seen["replicas"]
    assert seen["results"] == ["200"] * REQUESTS, seen["results"]
    assert max(queue) >= REQUESTS - 3, queue  # the requests past the batch, as the pod's gauge had them
    assert seen["drained"] == 0
    assert "True" in seen["active"], (seen["active"], queue)  # KEDA saw requests waiting through the trigger
    assert scale[0] == (1, 1), scale  # min_replicas
    assert (2, 2) in scale, (scale, queue)  # max_replicas, the new pod Ready
    assert scale[-1][0] == 1, scale  # back to min_replicas once the queue drained
