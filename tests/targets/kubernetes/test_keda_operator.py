"""The bundled Kubernetes stack's ScaledObject, as inferry renders it, read by KEDA's real operator (v2.21.0, run
beside the suite's API server: tests/support/keda.py). KEDA accepts it and makes the HorizontalPodAutoscaler
that scales the engine's Deployment between the stack's replica bounds on the queue metric. Pods run no
containers here (kwok's nodes) and no Prometheus answers, so no scaling decision is taken: docs/kubernetes.md.
"""
from __future__ import annotations

import json
import time

import yaml

from infra.stack.stackfile import parse_deployment
from infra.targets.kubernetes.manifests import render
from tests.support.keda import keda_operator
from tests.support.kubernetes_stacks import raw_deployment, spec_of

NS = "keda-check"


def wait_for(cluster, kind: str, name: str, timeout: float = 90) -> dict:
    """The object once it exists (a kubectl get that succeeds)."""
    deadline = time.monotonic() + timeout
    while True:
        r = cluster.kubectl("get", kind, name, "-n", NS, "-o", "json", check=False)
        if r.returncode == 0:
            return json.loads(r.stdout)
        assert time.monotonic() < deadline, f"no {kind} {name} in {NS}: {r.stderr}"
        time.sleep(1)


def test_keda_makes_the_autoscaler_the_stack_asks_for(cluster, tmp_path):
    d = parse_deployment(raw_deployment(), "aws-k8s")
    a = d.target.autoscaling
    objects = [yaml.safe_load(text) for text in render(d, spec_of(d), "s").values()]
    # All of it: KEDA reads the Deployment's env (the API key's Secret) when it builds the scaler, and without
    # that Secret makes no HPA ("error resolving secrets for ScaleTarget").
    picked = [o for o in objects if o["kind"] != "Namespace"]
    for o in picked:
        o["metadata"]["namespace"] = NS
    cluster.kubectl("create", "namespace", NS, check=False)
    with keda_operator(cluster, NS, tmp_path):
        r = cluster.apply(*picked)
        assert r.returncode == 0, r.stderr
        (so,) = [o for o in picked if o["kind"] == "ScaledObject"]
        name = so["metadata"]["name"]
        hpa = wait_for(cluster, "hpa", f"keda-hpa-{name}")
        ready = {}
        for _ in range(60):
            status = wait_for(cluster, "scaledobject", name).get("status") or {}
            ready = {c["type"]: c for c in status.get("conditions", [])}.get("Ready", {})
            if ready.get("status") == "True":
                break
            time.sleep(1)
        # While KEDA runs: it takes its finalizer off (and the HPA with it), so the namespace can go.
        cluster.kubectl("delete", "scaledobject", name, "-n", NS, "--timeout=60s", check=False)
    assert ready.get("status") == "True", (ready, (tmp_path / "keda.log").read_text()[-3000:])
    assert status["externalMetricNames"] == ["s0-prometheus"]
    spec = hpa["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
    assert (spec["minReplicas"], spec["maxReplicas"]) == (a.min_replicas, a.max_replicas) == (2, 6)
    (metric,) = spec["metrics"]
    assert metric["type"] == "External" and metric["external"]["metric"]["name"] == "s0-prometheus"
    assert metric["external"]["target"] == {"type": "AverageValue", "averageValue": str(a.queue_target)}
    assert metric["external"]["metric"]["selector"]["matchLabels"] == {"scaledobject.keda.sh/name": name}
    # cooldown_s reaches the HPA KEDA made: without it, scale-down waits the HPA's default 300 s.
    assert spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == a.cooldown_s
    (owner,) = hpa["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("ScaledObject", name)
    cluster.kubectl("delete", "namespace", NS, "--wait=false", check=False)


def test_the_cluster_keeps_its_own_scaledobject_schema_after_keda(cluster, tmp_path):
    """KEDA's CRDs go when it stops: the session's later tests meet the suite's transcribed schema again."""
    with keda_operator(cluster, NS, tmp_path):
        served = json.loads(cluster.kubectl("get", "crd", "scaledobjects.keda.sh", "-o", "json").stdout)
        assert "subresources" in served["spec"]["versions"][0]  # KEDA's own (status subresource)
    after = json.loads(cluster.kubectl("get", "crd", "scaledobjects.keda.sh", "-o", "json").stdout)
    assert "subresources" not in after["spec"]["versions"][0]
    assert cluster.kubectl("get", "crd", "scaledjobs.keda.sh", check=False).returncode != 0


def test_an_object_keda_finalized_does_not_hold_its_crd_after_keda(cluster, tmp_path):
    """A ScaledObject left behind carries KEDA's finalizer, which nobody removes once KEDA stops: the CRDs are
    still swapped back, not left terminating, and the next test can create ScaledObjects."""
    ns = f"{NS}-left"  # the other tests' namespace may still be terminating
    so = {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "left", "namespace": ns},
          "spec": {"scaleTargetRef": {"name": "absent"},
                   "triggers": [{"type": "cpu", "metricType": "Utilization", "metadata": {"value": "50"}}]}}
    cluster.kubectl("create", "namespace", ns, check=False)
    with keda_operator(cluster, ns, tmp_path):
        assert cluster.apply(so).returncode == 0
        finalizers: list = []
        for _ in range(60):
            got = json.loads(cluster.kubectl("get", "scaledobject", "left", "-n", ns, "-o", "json").stdout)
            finalizers = got["metadata"].get("finalizers") or []
            if finalizers:
                break
            time.sleep(1)
        assert finalizers, "KEDA put no finalizer on the ScaledObject"
    crd = json.loads(cluster.kubectl("get", "crd", "scaledobjects.keda.sh", "-o", "json").stdout)
    assert "deletionTimestamp" not in crd["metadata"] and "subresources" not in crd["spec"]["versions"][0]
    r = cluster.kubectl("create", "--dry-run=server", "-f", "-", stdin=json.dumps(so), check=False)
    assert r.returncode == 0, r.stderr
    cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
