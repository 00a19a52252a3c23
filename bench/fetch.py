"""Benchmark (not a test): the SSH hosts' weight fetch (fetch.sh, as `inferry up` runs it) against `s5cmd cp`.

    .venv/bin/python bench/fetch.py --size-gib 2 --reps 6

One model (shards of --shard-mib and small files) in a local `rclone serve s3`, fetched into a fresh folder by
three commands, interleaved (the order rotating each repetition), dirty pages flushed before each run:
- fetch.sh with the byte ranges `inferry up` sends (a shard larger than the range size comes in ranges);
- fetch.sh with one request per file (what it did before ranges);
- `s5cmd cp` of the prefix, with its defaults (it checks nothing of its own; fetch.sh checks every sha256);
- fetch.sh with ranges and its sha256 check taken out: a measurement of what the check costs, never shipped;
- with `--before FILE`, that fetch.sh (say `git show REV:infra/targets/ssh/scripts/fetch.sh > FILE`) with ranges.
Prints medians and bests and s5cmd/fetch.sh (> 1: fetch.sh is faster), and the median CPU seconds each command
used (user + system, its own and its children's: curl, openssl; not the server's). The server runs on the same
cores, so where the fetch is CPU-bound, CPU seconds per GiB decide the ratio.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.weights import make_model, tool  # noqa: E402
from infra.storage.presign import presign_model  # noqa: E402
from infra.storage.settings import MiB, StoreSettings  # noqa: E402
from infra.storage.sync import push  # noqa: E402
from infra.targets.ssh.weights import fetch_lines, range_bytes  # noqa: E402
from tests.support.servers.s3 import S3Server  # noqa: E402

KEYS = ("bench-access-key", "bench-secret-key-0123456789")
BUCKET = "bench"
SCRIPT = (ROOT / "infra" / "targets" / "ssh" / "scripts" / "fetch.sh").read_text()
CHECK = '[ "$(sha256_of <"$tmp")" = "$sha" ]'  # fetch.sh's check of a downloaded file, before it moves into place


def commands(server: S3Server, lines: dict[str, str], parallel: int,
             before: Path | None = None) -> dict[str, Callable[[str], None]]:
    """Each case: a function that fetches the model into a folder (exits the bench when it fails)."""
    env = {**os.environ, "AWS_ACCESS_KEY_ID": KEYS[0], "AWS_SECRET_ACCESS_KEY": KEYS[1], "AWS_REGION": server.region}

    def script(text: str, body: str) -> Callable[[str], None]:
        return lambda d: _run(["sh", "-c", f"set -- {d} {parallel}; {body}"], env, text)

    cases = {name: script(text, SCRIPT) for name, text in lines.items()}
    if SCRIPT.count(CHECK) != 1:
        sys.exit("fetch.sh's sha256 check is not where this bench expects it: update CHECK")
    cases["fetch.sh, ranges, no sha256 check"] = script(lines["fetch.sh, ranges"], SCRIPT.replace(CHECK, "true"))
    if before:
        cases[f"{before.name} (--before), ranges"] = script(lines["fetch.sh, ranges"], before.read_text())
    cases["s5cmd cp"] = lambda d: _run([tool("s5cmd"), "--endpoint-url", server.endpoint, "cp",
                                        f"s3://{BUCKET}/m/*", f"{d}/"], env, "")
    return cases


def _run(cmd: list[str], env: dict[str, str], stdin: str) -> None:
    proc = subprocess.run(cmd, input=stdin, env=env, text=True, capture_output=True)
    if proc.returncode:
        sys.exit(f"{Path(cmd[0]).name} failed: {proc.stderr.strip()[-500:]}")


def main() -> None:
    """Set up the store, time the three fetches, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gib", type=float, default=2)
    ap.add_argument("--shard-mib", type=int, default=512)
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--parallel", type=int, default=8, help="fetch.sh's parallel requests (target default: 8)")
    ap.add_argument("--before", type=Path, help="another fetch.sh to time beside this one (a change's baseline)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="inferry-bench-fetch-"))
    try:
        with S3Server(work / "s3", *KEYS) as server:
            server.bucket(BUCKET)
            settings = StoreSettings(server.endpoint, server.region, BUCKET, *KEYS)
            make_model(work / "model", int(args.size_gib * (1 << 30)), args.shard_mib * MiB)
            push(settings, work / "model", "m", show=False)
            shutil.rmtree(work / "model")
            files = list(presign_model(settings, "m").files)
            total = sum(f.size for f in files)
            lines = {"fetch.sh, ranges": fetch_lines(files, range_bytes(total, args.parallel)),
                     "fetch.sh, one request per file": fetch_lines(files, max(f.size for f in files))}
            cases = commands(server, lines, args.parallel, args.before)
            cases["s5cmd cp"](str(work / "warm"))  # the server computes each object's MD5 once, before timing
            shutil.rmtree(work / "warm")
            times, cpu = timed(cases, work / "out", args.reps)
        report(times, cpu, f"{total / (1 << 30):.1f} GiB in {len(files)} files, shards of {args.shard_mib} MiB, "
                      f"range size {range_bytes(total, args.parallel) // MiB} MiB, {os.cpu_count()} CPUs")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def timed(cases: dict, out: Path, reps: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall seconds and CPU seconds of each case per repetition, the order rotating."""
    names, times, cpu = list(cases), {name: [] for name in cases}, {name: [] for name in cases}
    for r in range(reps):
        for name in names[r % len(names):] + names[:r % len(names)]:
            shutil.rmtree(out, ignore_errors=True)
            os.sync()
            c0, t0 = os.times(), time.perf_counter()
            cases[name](str(out))
            times[name].append(time.perf_counter() - t0)
            c1 = os.times()  # reaped children only: the command and what it ran, not the server (still running)
            cpu[name].append(c1.children_user - c0.children_user + c1.children_system - c0.children_system)
        print(f"  rep {r + 1}/{reps} done", flush=True)
    return times, cpu


def report(times: dict[str, list[float]], cpu: dict[str, list[float]], conditions: str) -> None:
    """Median and best of each case, s5cmd's over it, and its CPU seconds."""
    floor = times["s5cmd cp"]
    print(f"\n{conditions}\n")
    print("| command | median | best | s5cmd/this median | s5cmd/this best | CPU s (median) |")
    print("|---|---|---|---|---|---|")
    for name, secs in times.items():
        med, best = statistics.median(secs), min(secs)
        print(f"| {name} | {med:.2f} s | {best:.2f} s | {statistics.median(floor) / med:.2f}x "
              f"| {min(floor) / best:.2f}x | {statistics.median(cpu[name]):.2f} |")


if __name__ == "__main__":
    main()
