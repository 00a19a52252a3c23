"""The real node itself (tests/support/node.py): a GPU-requesting pod really runs, passes a real HTTP readiness
probe and answers through a ClusterIP Service; stopping the node leaves nothing behind."""
from __future__ import annotations

import json
import os

import pytest

from tests.support.node import GPU_PRODUCT, LABEL, TAINT, Node
from tests.support.node_images import SANDBOX_IMAGE

pytestmark = pytest.mark.cluster
NS = "node-check"


def web(image: str) -> list[dict]:
    """A Deployment serving HTTP with python3 (stand-in image), 2 GPUs requested, and its Service."""
    labels = {"app": "web"}
    container = {"name": "web", "image": image, "command": ["python3", "-m", "http.server", "8080"],
                 "resources": {"limits": {"nvidia.com/gpu": "2"}},
                 "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1}}
    pod = {"metadata": {"labels": labels},
           "spec": {"containers": [container], "nodeSelector": {LABEL: "true", "nvidia.com/gpu.product": GPU_PRODUCT},
                    "tolerations": [{**TAINT, "operator": "Equal"}], "terminationGracePeriodSeconds": 1}}
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": NS},
             "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": pod}},
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NS},
             "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": 8080}]}}]


def test_a_gpu_pod_runs_passes_its_probe_and_answers_through_a_service(node, cluster):
    r = cluster.apply(*web(SANDBOX_IMAGE))
    assert r.returncode == 0, r.stderr
    try:
        cluster.kubectl("rollout", "status", "deployment/web", "-n", NS, "--timeout=120s")
        (pod,) = cluster.get("pods", namespace=NS)["items"]
        assert pod["spec"]["nodeName"] == node.name and pod["status"]["podIP"].startswith("10.218.")
        probed = cluster.kubectl("logs", "-n", NS, "deployment/web").stdout  # through the kubelet, by InternalIP
        assert '"GET / HTTP/1.1" 200' in probed  # the kubelet's probe: nothing else has asked yet
        ip = cluster.get("service", "web", NS)["spec"]["clusterIP"]
        r = node.http(f"http://{ip}/")
        assert r.stdout.endswith("\n200"), r.stdout + r.stderr
    finally:
        cluster.kubectl("delete", "namespace", NS, "--wait=true", "--timeout=120s", check=False)


def test_stopping_a_node_leaves_no_process_mount_cgroup_or_namespace(cluster):
    extra = Node(cluster, n=node_number_beside(cluster))
    try:
        from infra.engines.spec import PROXY_IMAGE

        extra.start([], "inferry.test/fetch:1", PROXY_IMAGE)
        ns = json.loads(cluster.kubectl("get", "node", extra.name, "-o", "json").stdout)
        assert ns["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        doc = web(SANDBOX_IMAGE)
        doc[1]["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": extra.name}
        cluster.apply(*doc)
        cluster.kubectl("rollout", "status", "deployment/web", "-n", NS, "--timeout=120s")
        assert extra.teardown.shim_pids(), "no container ran"
    finally:
        extra.stop()
        cluster.kubectl("delete", "namespace", NS, "--wait=true", "--timeout=120s", check=False)
    assert extra.leftovers() == []


def node_number_beside(cluster) -> int:
    """A node number no running node of this session uses."""
    return (os.getpid() + 125) % 250 + 1
