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
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from coldstart_kubernetes import FETCH_OWN, kubernetes  # noqa: E402
from coldstart_store import BUCKET, Times, push_model, s5cmd_floor  # noqa: E402
from up import API_KEY, KEYS, MODEL, bench_world, deployment, fresh_hosts  # noqa: E402


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
        work = Path(tempfile.mkdtemp(prefix="inferry-bench-coldstart-k8s-"))
        try:
            for gib, times in kubernetes(args.sizes_gib, args.reps, work).items():
                table("kubernetes (real node, node-cache)", gib, times,
                      ["cold node: weights fetch", f"cold node: {FETCH_OWN}"])
        finally:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
