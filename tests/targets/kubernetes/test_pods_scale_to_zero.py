"""Scale to zero on the real node: with `min_replicas: 0`, KEDA's real operator takes the engine's Deployment to
zero pods once the gateway has seen no request for `cooldown_s`; a request with a key is then held at the
gateway (inferry's Caddy build) while KEDA, asking the real Prometheus for the gateway's own request metrics, wakes
one pod, and is answered 200; past the gateway's queue (limits.max_in_flight) a request gets 503 at once. A
request without a key is refused and wakes nothing. Whether an engine
container runs is read from the node's containerd, not from the API server or inferry.
"""
from __future__ import annotations

import json
import threading
import time

import pytest

from tests.support.keda import keda_operator
from tests.support.pods import API_KEY, MODEL, NAME, SECRETS, on_the_node, store  # noqa: F401
from tests.support.prometheus import PORT, prometheus_on_node
from tests.support.realengine import Project

pytestmark = [pytest.mark.cluster, pytest.mark.gateway, pytest.mark.scale_to_zero]
NS = "pods-zero"
COOLDOWN_S = 5
HOLD_S = 240


def engines_running(node) -> int:
    """Engine containers of the namespace that containerd runs on the node now (the kubelet's runtime)."""
    ids = node.ctr("containers", "ls", "-q", f'labels."io.kubernetes.pod.namespace"=={NS},'
                   'labels."io.kubernetes.container.name"==engine').stdout.split()  # one filter: both must hold
    tasks = dict(line.split()[0::2] for line in node.ctr("tasks", "ls").stdout.splitlines()[1:] if line.strip())
    return sum(1 for i in ids if tasks.get(i) == "RUNNING")


def until(check, what: str, timeout: float) -> float:
    """Seconds until check() held; fails with `what` past the timeout."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout, what
        time.sleep(1)
    return time.monotonic() - start


def send(node, ip: str, key: str | None, out: dict) -> None:
    """One chat completion through the gateway's Service: its status and how long it took."""
    auth = ["-H", f"Authorization: Bearer {key}"] if key else []
    body = json.dumps({"model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
    start = time.monotonic()
    r = node.netns_exec("curl", "-sS", "-m", str(HOLD_S + 30), "-o", "/dev/null", "-w", "%{http_code}",
                        "-H", "Content-Type: application/json", *auth, "-d", body,
                        f"http://{ip}/v1/chat/completions", timeout=HOLD_S + 60, check=False)
    out.update(status=r.stdout.strip(), seconds=time.monotonic() - start)


def test_idle_goes_to_zero_pods_and_one_request_with_a_key_wakes_one_and_is_answered(node, cluster, store,
                                                                                     tmp_path, installed):
    url = f"http://{node.lay.address}:{PORT}"
    d = on_the_node(cluster, store, NS, autoscaling={
        "engine": "keda", "min_replicas": 0, "max_replicas": 1, "scale_to_zero": True, "prometheus_url": url,
        "cooldown_s": COOLDOWN_S})
    # A queue of two: while at zero, two requests are held and a third is refused at once (503, Retry-After).
    d["target"]["gateway"] = {"replicas": 1, "hold_s": HOLD_S, "limits": {"max_in_flight": 2},
                              **{k: d["target"][k] for k in ("node_selector", "tolerations")}}
    project = Project(tmp_path / "project", installed[1])
    project.write_stack("zero", d, SECRETS)
    with keda_operator(cluster, NS, tmp_path, adapter_ip=node.lay.gateway):
        try:
            r = project.inferry("up", "zero", timeout=600, check=False)
            assert r.returncode == 0, r.stdout + r.stderr
            assert engines_running(node) == 1  # up waits for the first pod: the stack is proven to start
            monitor = cluster.get("servicemonitor", f"{NAME}-gateway", NS)
            with prometheus_on_node(node, monitor, NS, tmp_path / "prom") as prom:
                until(lambda: prom.targets_up() == 1, "Prometheus never scraped the gateway", 60)
                until(lambda: engines_running(node) == 0, "the idle engine never went to zero", COOLDOWN_S + 120)
                status = project.inferry("status", "zero", check=False)
                assert status.returncode == 0 and "scaled to zero (no engine pod)" in status.stdout, status.stdout
                ip = cluster.get("service", f"{NAME}-gateway", NS)["spec"]["clusterIP"]
                anonymous: dict = {}
                send(node, ip, None, anonymous)
                assert anonymous["status"] == "401"
                time.sleep(40)  # two KEDA polls and many scrapes: nothing woke
                assert engines_running(node) == 0
                assert cluster.get("deployment", NAME, NS)["spec"]["replicas"] == 0
                held, second, third = {}, {}, {}
                clients = [threading.Thread(target=send, args=(node, ip, API_KEY, out)) for out in (held, second)]
                for c in clients:
                    c.start()
                time.sleep(3)  # both are in flight at the gateway, held
                send(node, ip, API_KEY, third)
                woke = until(lambda: engines_running(node) == 1, "no engine pod woke for the request", HOLD_S)
                for c in clients:
                    c.join()
        finally:
            project.pulumi("destroy", "--yes", "--stack", "zero", check=False, timeout=600)
    cluster.kubectl("delete", "namespace", NS, "--wait=false", check=False)
    print(f"held {held['seconds']:.1f} s at the gateway (engine container started after {woke:.1f} s)")
    assert held["status"] == "200" and second["status"] == "200", (held, second)
    assert held["seconds"] >= woke  # it was held, not answered before a replica existed
    assert third["status"] == "503" and third["seconds"] < 10, third  # past the queue: refused, not held
