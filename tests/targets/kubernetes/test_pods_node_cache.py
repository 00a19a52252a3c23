"""weights_delivery: node-cache on the real node: the first pod fetches the weights into the node's folder (a local
PersistentVolume, admitted under the namespace's baseline Pod Security), removing what a pod gone mid-fetch left
there, and the next pod on that node fetches nothing and serves from the same verified copy. What the store sent
is counted by a proxy in front of it; the copy on the node is read from the node's disk and compared with what
was pushed.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from datetime import datetime

import pytest

from tests.support.pods import API_KEY, NAME, SECRETS, chat, on_the_node, serving_pods, store  # noqa: F401
from tests.support.realengine import Project
from tests.support.servers.proxy import CountingProxy

pytestmark = pytest.mark.cluster
NS = "pods-cache"


def _at(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def start_seconds(pod: dict) -> tuple[float, float]:
    """(seconds from the pod's creation to Ready, seconds its fetch container ran), from the kubelet's status."""
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    fetch = next(s for s in pod["status"]["initContainerStatuses"] if s["name"] == "fetch-weights")
    done = fetch["state"]["terminated"]
    return ((_at(ready["lastTransitionTime"]) - _at(pod["metadata"]["creationTimestamp"])).total_seconds(),
            (_at(done["finishedAt"]) - _at(done["startedAt"])).total_seconds())


def ready_pod(cluster, other_than: str = "", timeout: float = 180) -> dict:
    """The one serving pod once it is Ready (and is not `other_than`)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        pods = [p for p in serving_pods(cluster, NS) if p["metadata"]["name"] != other_than]
        conditions = {c["type"]: c["status"] for c in pods[0].get("status", {}).get("conditions", [])} if pods else {}
        if len(pods) == 1 and conditions.get("Ready") == "True":
            return pods[0]
        time.sleep(1)
    raise AssertionError(f"no Ready engine pod in {NS} after {timeout} s")


def test_a_new_pod_on_a_warm_node_fetches_nothing_and_serves_the_verified_copy(node, cluster, store, tmp_path,
                                                                               installed):
    cache = tmp_path / "node-cache"
    cache.mkdir()  # the node's set-up: the folder the local volume names
    gone = cache / ".incoming" / f"{'0' * 64}.pod-gone"  # what a pod deleted mid-fetch left there an hour ago
    (gone / "sub").mkdir(parents=True)
    (gone / "sub" / "model-00001.safetensors").write_bytes(b"x" * 1000)
    for path in (gone / "sub" / "model-00001.safetensors", gone / "sub", gone):
        os.utime(path, (time.time() - 3600,) * 2)
    with CountingProxy(store.endpoint, host=node.lay.gateway) as proxy:
        d = on_the_node(cluster, store, NS, weights_delivery="node-cache", node_cache_path=str(cache))
        d["storage"]["endpoint"] = proxy.endpoint
        project = Project(tmp_path / "project", installed[1])
        project.write_stack("cache", d, SECRETS)
        try:
            r = project.inferry("up", "cache", timeout=600, check=False)
            assert r.returncode == 0, r.stdout + r.stderr
            cold = ready_pod(cluster)
            cold_bytes = proxy.down
            log = cluster.kubectl("logs", "-n", NS, cold["metadata"]["name"], "-c", "fetch-weights").stdout
            assert not gone.exists() and "removing " + gone.name + ", left by a fetch" in log, log
            assert cold_bytes > 4 << 20  # the model's 4 MiB of shards came from the store
            (kept,) = [p for p in cache.iterdir() if p.name != ".incoming"]
            manifest = json.loads((kept / "inferry-manifest.json").read_text())
            assert kept.name == hashlib.sha256((kept / "inferry-manifest.json").read_bytes()).hexdigest()
            for f in manifest["files"]:  # the node's copy, read from its disk
                assert hashlib.sha256((kept / f["path"]).read_bytes()).hexdigest() == f["sha256"], f["path"]

            proxy.reset()
            cluster.kubectl("delete", "pod", "-n", NS, cold["metadata"]["name"], "--wait=true")
            warm = ready_pod(cluster, other_than=cold["metadata"]["name"])
            assert warm["spec"]["nodeName"] == cold["spec"]["nodeName"] == node.name
            assert proxy.down < 64 << 10, proxy.down  # the manifest alone
            log = cluster.kubectl("logs", "-n", NS, warm["metadata"]["name"], "-c", "fetch-weights").stdout
            assert "the node cache holds manifest " + kept.name in log, log
            status, body = chat(node, cluster, NS, API_KEY, "200")
            assert status == "200", body
            (cold_s, cold_fetch), (warm_s, warm_fetch) = start_seconds(cold), start_seconds(warm)
            print(f"\ncold node: {cold_bytes} bytes from the store, ready in {cold_s:.0f} s (fetch {cold_fetch:.0f} s)"
                  f"\nwarm node: {proxy.down} bytes from the store, ready in {warm_s:.0f} s (fetch {warm_fetch:.0f} s)")
            assert cluster.get("persistentvolume", f"{NS}.{NAME}.node-cache")["status"]["phase"] == "Bound"
        finally:
            project.pulumi("destroy", "--yes", "--stack", "cache", check=False, timeout=600)
    assert (cache / kept.name).is_dir()  # the copy outlives the deployment: the next one on this node uses it
