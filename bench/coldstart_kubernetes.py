"""The cold-start bench on the real node (bench/coldstart.py --targets kubernetes): a pod on a cold node and one on
a warm node, phases from the kubelet, beside s5cmd in the node's network and in the serving pod's."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from coldstart_store import BUCKET, Times, push_model, s5cmd_floor
from up import KEYS, MODEL

FETCH_OWN = "weights fetch, its own log (1/100 s)"


def k8s_pod_phases(pod: dict) -> dict[str, float]:
    """Phases of one pod from the kubelet's status (second resolution)."""
    at = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()  # noqa: E731
    inits = {s["name"]: s["state"]["terminated"] for s in pod["status"]["initContainerStatuses"]}
    engine = next(s for s in pod["status"]["containerStatuses"] if s["name"] == "engine")
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    created = at(pod["metadata"]["creationTimestamp"])
    return {"pod created -> first init": at(inits["fetch-weights"]["startedAt"]) - created,
            "weights fetch": at(inits["fetch-weights"]["finishedAt"]) - at(inits["fetch-weights"]["startedAt"]),
            "verify (sha256)": at(inits["verify-weights"]["finishedAt"]) - at(inits["verify-weights"]["startedAt"]),
            "engine start + ready": at(ready["lastTransitionTime"]) - at(engine["state"]["running"]["startedAt"]),
            "pod created -> Ready": at(ready["lastTransitionTime"]) - created}


def fetch_seconds(cluster, pod: dict) -> float:
    """The fetch's own seconds, to the hundredth, from its log line (`weights: fetched ... in S s`)."""
    log = cluster.kubectl("logs", "-n", pod["metadata"]["namespace"], pod["metadata"]["name"], "-c",
                          "fetch-weights").stdout
    took = re.search(r"^weights: fetched .* in (\d+\.\d+) s$", log, re.M)
    if took is None:
        raise SystemExit(f"no fetch time in the fetch container's log:\n{log[-1000:]}")
    return float(took.group(1))


def k8s_new_pod(cluster, ns: str, old: str | None) -> dict:
    """Delete the serving pod (a scale-up's new pod on the same node) and return the next one once Ready."""
    from tests.support.pods import serving_pods

    if old:
        cluster.kubectl("delete", "pod", "-n", ns, old, "--wait=true")
    end = time.monotonic() + 1800
    while time.monotonic() < end:
        pods = [p for p in serving_pods(cluster, ns) if p["metadata"]["name"] != old]
        if pods and any(c["type"] == "Ready" and c["status"] == "True" for c in pods[0]["status"].get("conditions", [])):
            return pods[0]
        time.sleep(0.5)
    raise SystemExit("no Ready engine pod after 30 minutes")


def engine_pid(node, pod: dict) -> int:
    """The host pid of a pod's engine container (its task in the node's containerd)."""
    cid = next(c for c in pod["status"]["containerStatuses"] if c["name"] == "engine")["containerID"].split("//")[-1]
    for line in node.ctr("task", "ls").stdout.splitlines()[1:]:
        task, pid, *_ = line.split()
        if task == cid:
            return int(pid)
    raise SystemExit(f"no containerd task for the engine container {cid}")


def kubernetes(sizes: list[int], reps: int, work: Path) -> dict[int, Times]:
    """Cold and warm pods on the real node per size, interleaved with s5cmd in the node's network."""
    from infra.engines.spec import PROXY_IMAGE
    from infra.targets.kubernetes.config import KubernetesTarget
    from tests.support.cluster import Cluster, cluster_tools
    from tests.support.hosts.docker import image_names
    from tests.support.node import Node
    from tests.support.servers.s3 import S3Server

    cluster = Cluster(f"coldstart-{os.getpid()}", work / "kwok", cluster_tools())
    cluster.create()
    node = Node(cluster)
    try:
        node.start([i for i in image_names() if i != PROXY_IMAGE],
                   KubernetesTarget.model_fields["fetch_image"].default, PROXY_IMAGE)
        server = S3Server(work / "s3", *KEYS, node.lay.gateway, 0).start()
        (server.root / BUCKET).mkdir(parents=True)
        out = {gib: one_size(cluster, node, server, work, gib, reps) for gib in sizes}
        server.stop()
        return out
    finally:
        node.stop()
        cluster.delete()


def one_size(cluster, node, server, work: Path, gib: int, reps: int) -> Times:
    """A deployment of `gib` GiB of weights with a node cache: cold and warm pods, and the floors, per repetition."""
    from tests.support.pods import NAME, SECRETS, on_the_node
    from tests.support.realengine import Project

    prefix, times = push_model(server, work, gib), {}
    cache = work / f"node-cache-{gib}"
    cache.mkdir()
    d = on_the_node(cluster, server, "coldstart", weights_delivery="node-cache", node_cache_path=str(cache),
                    cache_size=f"{gib * 3}Gi", memory="2Gi", startup_timeout_s=1800)
    d["model"]["weights"] = prefix
    project = Project(work / f"k8s-{gib}")
    project.write_stack("cold", d, {**SECRETS, "s3AccessKey": KEYS[0], "s3SecretKey": KEYS[1]})
    r = project.inferry("up", "cold", timeout=3600, check=False)
    if r.returncode:
        sys.exit(r.stdout + r.stderr)
    ip = cluster.get("service", NAME, "coldstart")["spec"]["clusterIP"]
    pod = k8s_new_pod(cluster, "coldstart", None)
    for rep in range(reps):
        if rep % 2:
            floors(node, server, prefix, work, pod, times)
        pod = cold_and_warm(cluster, node, ip, cache, pod, times)
        if rep % 2 == 0:
            floors(node, server, prefix, work, pod, times)
        print(f"  kubernetes {gib} GiB rep {rep + 1}/{reps} done", flush=True)
    project.pulumi("destroy", "--yes", "--stack", "cold", check=False, timeout=1800)
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(server.root / BUCKET / prefix, ignore_errors=True)
    return times


def cold_and_warm(cluster, node, ip: str, cache: Path, pod: dict, times: Times) -> dict:
    """A new pod on an emptied node cache, then one more on the warm node; returns the last pod."""
    from tests.support.pods import API_KEY as POD_KEY

    for label in ("cold node", "warm node"):
        if label == "cold node":
            for kept in cache.iterdir():
                shutil.rmtree(kept)
        pod = k8s_new_pod(cluster, "coldstart", pod["metadata"]["name"])
        for phase, s in k8s_pod_phases(pod).items():
            times.setdefault(f"{label}: {phase}", []).append(s)
        if label == "cold node":
            times.setdefault(f"{label}: {FETCH_OWN}", []).append(fetch_seconds(cluster, pod))
        t0 = time.perf_counter()  # from Ready as the kubelet reported it, retried as kube-proxy catches up
        r = node.http(f"http://{ip}:8000/v1/chat/completions", "-N", "-H", "Content-Type: application/json",
                      "-H", f"Authorization: Bearer {POD_KEY}",
                      "-d", json.dumps({"model": MODEL, "max_tokens": 8, "stream": True,
                                        "messages": [{"role": "user", "content": "hi"}]}), timeout=120)
        if not r.stdout.endswith("\n200"):
            sys.exit(f"the first chat completion failed: {r.stdout[-300:]} {r.stderr[-300:]}")
        times.setdefault(f"{label}: first streamed chat", []).append(time.perf_counter() - t0)
    return pod


def floors(node, server, prefix: str, work: Path, pod: dict, times: Times) -> None:
    """s5cmd cp of the prefix in the node's network, then in the serving pod's (the fetch container's path)."""
    times.setdefault("s5cmd cp (floor)", []).append(s5cmd_floor(
        lambda c: node.netns_exec("sh", "-c", c, timeout=1800, check=False), server, prefix, str(work / "s5")))
    net = f"--net=/proc/{engine_pid(node, pod)}/ns/net"
    times.setdefault("s5cmd cp, in a pod's network", []).append(s5cmd_floor(
        lambda c: subprocess.run(["nsenter", net, "sh", "-c", c], capture_output=True, text=True, timeout=1800),
        server, prefix, str(work / "s5")))
