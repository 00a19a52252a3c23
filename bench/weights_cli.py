"""Benchmark (not a test): whole `inferry weights` commands against s5cmd with its defaults, same server.

    .venv/bin/python bench/weights_cli.py --sizes-gib 2 8 --reps 5

Every figure is a whole process, as a user runs it (start-up, store set-up, the transfer, every
byte checked by inferry; s5cmd checks nothing beyond its own transfer), the two tools alternating
in each repetition (who goes first alternates too), dirty pages flushed before each run. Prints
the median and best seconds of each tool and the ratio s5cmd/inferry (> 1: inferry is faster),
and the median CPU seconds (user + system) each client process used: on a shared machine the
wall-clock figures swing with the load, CPU time much less (the server's own CPU is in neither).
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.weights import make_model, tool  # noqa: E402
from infra.storage.settings import MiB  # noqa: E402
from tests.support.servers.s3 import S3Server  # noqa: E402

KEYS = ("bench-access-key", "bench-secret-key-0123456789")
BUCKET = "bench"
# Next to each case: what of the figure belongs to the test server (rclone serve s3), not the tools.
NOTES = {
    "first push": "rclone assembles multipart parts on its side (buffered to disk) and hashes each upload",
    "first pull": "rclone computes each object's MD5 (ETag) on its first read: s5cmd pays it in its LIST, one "
                  "file after another; inferry in its HEADs, beside the data moving",
    "re-pull": "objects read before: rclone has their MD5, as stores that keep ETags (S3, R2, MinIO) always do",
    "re-sync 100": "unchanged 100-file model, s5cmd sync against inferry push (0 bytes sent by either)",
    "upload 100": "first upload of 100 files (94 x 4 MiB + 6 small), inferry hashing them first",
}


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of a whole command; exits the bench when it fails (a wrong figure is worse)."""
    os.sync()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    secs = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        sys.exit(f"{Path(cmd[0]).name} {' '.join(cmd[1:4])}... failed: {proc.stderr.strip()[-500:]}")
    return secs, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


class Bench:
    """The two tools' command lines against one server, and the seconds each case took."""

    def __init__(self, server: S3Server, work: Path):
        self.work = work
        self.env = {**os.environ, "AWS_ACCESS_KEY_ID": KEYS[0], "AWS_SECRET_ACCESS_KEY": KEYS[1],
                    "AWS_REGION": server.region, "AWS_EC2_METADATA_DISABLED": "true",
                    "XDG_CACHE_HOME": str(work / "cache")}
        self.inferry = [tool("inferry"), "weights"]
        self.store = ["--endpoint", server.endpoint, "--bucket", BUCKET]
        self.s5 = [tool("s5cmd"), "--endpoint-url", server.endpoint]
        self.times: dict[tuple[str, str], list[tuple[float, float]]] = {}

    def pair(self, case: str, rep: int, inferry: list[str], s5cmd: list[str], before=None) -> None:
        """Time both tools on one case, the order alternating by repetition; `before` runs ahead of each."""
        runs = [("inferry", self.inferry + inferry), ("s5cmd", self.s5 + s5cmd)]
        for name, cmd in runs if rep % 2 == 0 else runs[::-1]:
            if before:
                before()
            self.times.setdefault((case, name), []).append(run(cmd, self.env))

    def first_use(self) -> None:
        """Forget inferry's local digest cache and journal: a push hashes every file, as the first one does."""
        shutil.rmtree(self.work / "cache", ignore_errors=True)


def model_reps(b: Bench, server: S3Server, model: Path, label: str, reps: int) -> None:
    """push, first pull and re-pull of one model, `reps` times, each on fresh prefixes."""
    out, url = b.work / "pull", f"s3://{BUCKET}"
    subprocess.run(["cat", *map(str, model.iterdir())], stdout=subprocess.DEVNULL)  # page cache warm for both
    for r in range(reps):
        inf, s5 = f"inf-{label}-{r}", f"s5-{label}-{r}"
        b.pair(f"{label} first push", r, ["push", str(model), "--prefix", inf, *b.store],
               ["cp", f"{model}/*", f"{url}/{s5}/"], before=b.first_use)
        for case in ("first pull", "re-pull"):
            b.pair(f"{label} {case}", r, ["pull", str(out), "--prefix", inf, *b.store],
                   ["cp", f"{url}/{s5}/*", f"{out}/"], before=lambda: shutil.rmtree(out, ignore_errors=True))
        if r == 0:
            check_pulled(model, out)
        shutil.rmtree(out, ignore_errors=True)
        for prefix in (inf, s5):  # free the disk: never read again
            shutil.rmtree(server.root / BUCKET / prefix, ignore_errors=True)
        print(f"  {label} rep {r + 1}/{reps} done", flush=True)


def check_pulled(model: Path, out: Path) -> None:
    """The last pull (s5cmd's or inferry's) holds every file of the model at its size."""
    want = {p.name: p.stat().st_size for p in model.iterdir()}
    got = {p.name: p.stat().st_size for p in out.iterdir() if p.name in want}
    if got != want:
        sys.exit(f"pulled files differ from the model: {sorted(set(want.items()) ^ set(got.items()))[:4]}")


def hundred_reps(b: Bench, work: Path, reps: int) -> None:
    """First upload of a 100-file model, then unchanged re-syncs of it."""
    folder, url = work / "hundred", f"s3://{BUCKET}"
    make_model(folder, 94 * 4 * MiB, 4 * MiB, small=6)
    for r in range(reps):
        b.pair("upload 100", r, ["push", str(folder), "--prefix", f"inf-h-{r}", *b.store],
               ["cp", f"{folder}/*", f"{url}/s5-h-{r}/"], before=b.first_use)
    for r in range(reps):  # the prefixes of the last upload hold the model: re-sync those
        last = reps - 1
        b.pair("re-sync 100", r, ["push", str(folder), "--prefix", f"inf-h-{last}", *b.store],
               ["sync", f"{folder}/", f"{url}/s5-h-{last}/"])


def report(times: dict[tuple[str, str], list[tuple[float, float]]], conditions: str) -> None:
    """One row per case: medians, bests, and s5cmd/inferry for each; median CPU seconds of each client."""
    print(f"\n{conditions}\n")
    print("| case | inferry median s | s5cmd median s | s5cmd/inferry median | best (s5cmd/inferry) "
          "| CPU s inferry / s5cmd (median) | server note |")
    print("|---|---|---|---|---|---|---|")
    for case in dict.fromkeys(c for c, _ in times):
        i, s = [w for w, _ in times[(case, "inferry")]], [w for w, _ in times[(case, "s5cmd")]]
        ci, cs = (statistics.median(c for _, c in times[(case, tool_)]) for tool_ in ("inferry", "s5cmd"))
        mi, ms = statistics.median(i), statistics.median(s)
        note = next((v for k, v in NOTES.items() if case.endswith(k)), "")
        print(f"| {case} | {mi:.3f} | {ms:.3f} | {ms / mi:.2f}x | {min(s) / min(i):.2f}x "
              f"({min(i):.3f} vs {min(s):.3f} s) | {ci:.2f} / {cs:.2f} | {note} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes-gib", type=float, nargs="*", default=[2.0], help="none: the 100-file cases only")
    ap.add_argument("--shard-mib", type=int, default=512)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--skip-hundred", action="store_true")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="inferry-bench-cli-"))
    try:
        with S3Server(work / "s3", *KEYS) as server:
            server.bucket(BUCKET)
            b = Bench(server, work)
            if not args.skip_hundred:
                hundred_reps(b, work, args.reps)
            for size in args.sizes_gib:
                need = 3.2 * size * (1 << 30)  # model, two stored copies, one pulled copy
                free = shutil.disk_usage(work).free
                if free < need:
                    print(f"skipping {size:g} GiB: {free / 2**30:.0f} GiB free, needs {need / 2**30:.0f}")
                    continue
                model = work / f"model-{size:g}"
                total = make_model(model, int(size * (1 << 30)), args.shard_mib * MiB)
                model_reps(b, server, model, f"{total / 2**30:.1f} GiB", args.reps)
                shutil.rmtree(model, ignore_errors=True)
        s5v = subprocess.run([tool("s5cmd"), "version"], capture_output=True, text=True).stdout.strip()
        report(b.times, f"{args.reps} repetitions, tools alternating, whole processes; s5cmd {s5v} with defaults "
                        f"(cp; sync for re-syncs); inferry defaults (8 workers, 32 MiB parts); rclone serve s3 on "
                        f"loopback; {os.cpu_count()} cores shared with other jobs")
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
