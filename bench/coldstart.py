"""Benchmark (not a test): a cold start in phases, on both targets, with `s5cmd cp` as the weights fetch's floor.

Run as root after `bash scripts/test.sh` built the tools (the SSH test hosts, the real node and the real
Pulumi CLI are the suite's): `python bench/coldstart.py [--sizes-gib 2 8] [--reps 3] [--targets ssh kubernetes]`.

- ssh: `inferry up` from nothing onto a fresh test host (process runtime: no image to pull), timed as a user runs
  it; the phases are read from its own progress lines as they arrive (the weights step, then the service step:
  writing the unit, starting the engine, its health gate), then the first chat completion.
- kubernetes: on the real node with `weights_delivery: node-cache`, a pod on a cold node (its cache folder empty)
  and one on a warm node (the next pod); the phases come from the kubelet's pod status: pod created -> first
  init container (scheduling, images: present on the node, so this is the sandbox), fetch, verify, engine
  start -> Ready, then the first chat completion through the Service; and the fetch's own seconds, to the
  hundredth, from its log line (the kubelet's times are whole seconds).
- floor: `s5cmd cp` of the same prefix from the same store, run on the same host (or in the node's network, and
  in the serving pod's network: the veth and bridge the fetch container's bytes cross), into a fresh folder, not
  waiting for the disk (neither does inferry's fetch); interleaved with the cold starts, the order alternating
  by repetition. The ratio
  s5cmd/inferry of the fetch phase above 1 means inferry's fetch (with its sha256 check) is faster.
The engine is the stand-in (its start-up is a configured wait, not a model load); a real engine's load goes in
its place. Dirty pages are flushed before each timed run. Prints medians and bests per phase.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from up import API_KEY, KEYS, MODEL, bench_world, deployment, fresh_hosts  # noqa: E402
from weights import make_model, tool  # noqa: E402

BUCKET = "inferry-weights"
FETCH_OWN = "weights fetch, its own log (1/100 s)"
Times = dict[str, list[float]]


def push_model(server, work: Path, gib: int) -> str:
    """A model of `gib` GiB (512 MiB shards and small files) in the store; returns its prefix."""
    from infra.storage.settings import StoreSettings
    from infra.storage.sync import push

    folder = work / f"model-{gib}g"
    make_model(folder, gib << 30, 512 << 20)
    (folder / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
                                                    "num_hidden_layers": 32, "num_attention_heads": 32,
                                                    "num_key_value_heads": 8, "vocab_size": 128256,
                                                    "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}))
    prefix = f"{MODEL}-{gib}g"
    push(StoreSettings(server.endpoint, server.region, BUCKET, *KEYS), folder, prefix, show=False)
    shutil.rmtree(folder)
    return prefix


def timed_lines(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, list[tuple[float, str]]]:
    """Run a whole command; (its seconds, each stdout line with the second it arrived)."""
    os.sync()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = [(time.perf_counter() - t0, line.rstrip()) for line in proc.stdout]
    if proc.wait():
        sys.exit(f"{' '.join(cmd)} failed:\n" + "\n".join(t for _, t in lines[-40:]))
    return time.perf_counter() - t0, lines


def step_span(lines: list[tuple[float, str]], suffix: str) -> float:
    """Seconds between `creating ... <suffix>` and `created ... <suffix>` in `inferry up`'s progress."""
    start = next(t for t, s in lines if s.strip().startswith("creating") and s.strip().endswith(suffix))
    end = next(t for t, s in lines if s.strip().startswith("created") and s.strip().endswith(suffix))
    return end - start


def first_token(url: str, model: str) -> float:
    """Seconds to the first streamed byte of a chat completion, as an OpenAI client sends it."""
    import urllib.request

    body = {"model": model, "max_tokens": 8, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    req = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(), headers={
        "Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=120) as r:
        if not r.read(1):
            raise SystemExit("the first chat completion streamed nothing")
        return time.perf_counter() - t0


def s5cmd_floor(run_in, server, prefix: str, dest: str) -> float:
    """Seconds of `s5cmd cp` of the prefix into a fresh folder, run by `run_in` (a host's or the node's shell)."""
    s5 = tool("s5cmd")
    os.sync()
    run_in(f"rm -rf {dest} && sync")
    cmd = (f"AWS_ACCESS_KEY_ID={KEYS[0]} AWS_SECRET_ACCESS_KEY={KEYS[1]} AWS_REGION={server.region} "
           f"{s5} --endpoint-url {server.endpoint} cp 's3://{BUCKET}/{prefix}/*' {dest}/ >/dev/null")
    t0 = time.perf_counter()  # the copy alone, as inferry's fetch phase: neither waits for the disk (no sync)
    r = run_in(cmd)
    seconds = time.perf_counter() - t0
    if r.returncode:
        sys.exit(f"s5cmd failed: {r.stderr[-500:]}")
    run_in(f"rm -rf {dest} && sync")
    return seconds


def ssh_rep(network, server, tmp: Path, prefix: str, rep: int, times: Times) -> None:
    """One cold `inferry up` onto a fresh host and one s5cmd copy onto it, the order alternating."""
    from tests.support.realengine import Project

    with fresh_hosts(network, [f"cs{rep}"]) as (host,):
        project = Project(tmp / f"ssh-{prefix}-{rep}")
        d = deployment([host], server)
        d["model"]["weights"] = prefix
        project.write_stack("cold", d, {})
        env = {**project.env, "BENCH_SSH_KEY": network.client_key_text, "BENCH_API_KEY": API_KEY,
               "BENCH_S3_ACCESS": KEYS[0], "BENCH_S3_SECRET": KEYS[1]}

        def cold() -> None:
            total, lines = timed_lines([*project.inferry_argv(), "up", "cold"], project.folder, env)
            times.setdefault("weights fetch", []).append(step_span(lines, "-weights"))
            times.setdefault("engine start + health", []).append(step_span(lines, "-service"))
            times.setdefault("first streamed chat", []).append(first_token(f"http://{host.address}:8000/v1", MODEL))
            times.setdefault("up, whole command", []).append(total)

        def floor() -> None:
            times.setdefault("s5cmd cp (floor)", []).append(
                s5cmd_floor(lambda c: host.exec(c, timeout=1800), server, prefix, "/var/tmp/s5"))

        for step in (cold, floor) if rep % 2 == 0 else (floor, cold):
            step()


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
    from tests.support.pods import API_KEY as POD_KEY, NAME, SECRETS, on_the_node
    from tests.support.realengine import Project
    from tests.support.servers.s3 import S3Server

    cluster = Cluster(f"coldstart-{os.getpid()}", work / "kwok", cluster_tools())
    cluster.create()
    node = Node(cluster)
    out: dict[int, Times] = {}
    try:
        node.start([i for i in image_names() if i != PROXY_IMAGE],
                   KubernetesTarget.model_fields["fetch_image"].default, PROXY_IMAGE)
        server = S3Server(work / "s3", *KEYS, node.lay.gateway, 0).start()
        (server.root / BUCKET).mkdir(parents=True)
        for gib in sizes:
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
                def cold_and_warm() -> None:
                    nonlocal pod
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
                        r = node.http(f"http://{ip}:8000/v1/chat/completions", "-N", "-H",
                                      "Content-Type: application/json", "-H", f"Authorization: Bearer {POD_KEY}",
                                      "-d", json.dumps({"model": MODEL, "max_tokens": 8, "stream": True,
                                                        "messages": [{"role": "user", "content": "hi"}]}), timeout=120)
                        if not r.stdout.endswith("\n200"):
                            sys.exit(f"the first chat completion failed: {r.stdout[-300:]} {r.stderr[-300:]}")
                        times.setdefault(f"{label}: first streamed chat", []).append(time.perf_counter() - t0)

                def floor() -> None:
                    times.setdefault("s5cmd cp (floor)", []).append(s5cmd_floor(
                        lambda c: node.netns_exec("sh", "-c", c, timeout=1800, check=False), server, prefix,
                        str(work / "s5")))
                    net = f"--net=/proc/{engine_pid(node, pod)}/ns/net"  # the path the fetch container's bytes take
                    times.setdefault("s5cmd cp, in a pod's network", []).append(s5cmd_floor(
                        lambda c: subprocess.run(["nsenter", net, "sh", "-c", c], capture_output=True, text=True,
                                                 timeout=1800), server, prefix, str(work / "s5")))

                for step in (cold_and_warm, floor) if rep % 2 == 0 else (floor, cold_and_warm):
                    step()
                print(f"  kubernetes {gib} GiB rep {rep + 1}/{reps} done", flush=True)
            project.pulumi("destroy", "--yes", "--stack", "cold", check=False, timeout=1800)
            shutil.rmtree(cache, ignore_errors=True)
            shutil.rmtree(server.root / BUCKET / prefix, ignore_errors=True)
            out[gib] = times
        server.stop()
    finally:
        node.stop()
        cluster.delete()
    return out


def ssh(sizes: list[int], reps: int) -> dict[int, Times]:
    """Cold `inferry up` runs per size on fresh test hosts, interleaved with s5cmd on them."""
    out: dict[int, Times] = {}
    with bench_world("inferry-bench-coldstart-") as (tmp, network, server):
        (server.root / BUCKET).mkdir(parents=True)
        for gib in sizes:
            prefix, times = push_model(server, tmp, gib), {}
            for rep in range(reps):
                ssh_rep(network, server, tmp, prefix, rep, times)
                print(f"  ssh {gib} GiB rep {rep + 1}/{reps} done", flush=True)
            shutil.rmtree(server.root / BUCKET / prefix, ignore_errors=True)
            out[gib] = times
    return out


def table(target: str, gib: int, times: Times, fetch_keys: list[str]) -> None:
    """Phase medians (best), and the floor's ratio to each fetch phase."""
    print(f"\n{target}, {gib} GiB of weights ({len(next(iter(times.values())))} runs each)")
    print(f"  {'phase':<40} {'median':>9} {'best':>9}")  # kubelet times have second resolution
    for phase, secs in times.items():
        print(f"  {phase:<40} {statistics.median(secs):>8.3f}s {min(secs):>8.3f}s")
    for floor_key in [k for k in times if k.startswith("s5cmd cp")]:
        floor = times[floor_key]
        for key in fetch_keys:
            mine = times[key]
            print(f"  {floor_key} / inferry's {key}: median "
                  f"{statistics.median(floor) / statistics.median(mine):.2f}x, best {min(floor) / min(mine):.2f}x")


def main() -> None:
    """Run the chosen targets and print their tables."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes-gib", type=int, nargs="+", default=[2, 8])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--targets", nargs="+", choices=("ssh", "kubernetes"), default=["ssh", "kubernetes"])
    args = p.parse_args()
    if "ssh" in args.targets:
        for gib, times in ssh(args.sizes_gib, args.reps).items():
            table("ssh (process runtime)", gib, times, ["weights fetch"])
    if "kubernetes" in args.targets:
        import tempfile

        work = Path(tempfile.mkdtemp(prefix="inferry-bench-coldstart-k8s-"))
        try:
            for gib, times in kubernetes(args.sizes_gib, args.reps, work).items():
                table("kubernetes (real node, node-cache)", gib, times,
                      ["cold node: weights fetch", f"cold node: {FETCH_OWN}"])
        finally:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
