"""Benchmark (not a test): CLI start-up as a user sees it, whole processes, hyperfine-style.

    .venv/bin/python bench/startup.py --runs 20

For each command: `--warmup` untimed runs, then `--runs` timed ones; prints median, best, mean
and standard deviation of wall-clock seconds, the median CPU seconds (user + system: on a shared
machine the wall clock swings with the load, CPU time much less), and the modules that cost most to import (`python -X importtime`,
cumulative, one run). A bare `python -c pass` is the floor. Target: `inferry plan` and
`inferry validate` <= 0.2 s. With `--before DIR` (an older checkout, e.g. `git archive REV | tar -x -C
DIR`), each command also runs from there, interleaved, with the same interpreter (and `--before-site`
first on its path: packages it ran with that differ, such as typer 0.29).
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STACK = str(ROOT / "stacks" / "Pulumi.eu-ssh.yaml")
CASES = {
    "python -c pass (floor)": ["-c", "pass"],
    "inferry validate": ["-m", "cli.main", "validate", STACK],
    "inferry plan": ["-m", "cli.main", "plan", STACK],
    "inferry weights pull --help": ["-m", "cli.main", "weights", "pull", "--help"],
}


def timed(args: list[str], env: dict[str, str], root: Path = ROOT, site: str = "") -> tuple[float, float]:
    """(wall, CPU) seconds of one whole process, run from the checkout at root (packages in `site` first);
    exits the bench when it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    path = os.pathsep.join(p for p in (site, str(root)) if p)
    proc = subprocess.run([sys.executable, *args], env={**env, "PYTHONPATH": path}, cwd=root,
                          stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    secs = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        sys.exit(f"{' '.join(args)} failed: {proc.stderr.strip()[-400:]}")
    return secs, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def top_imports(args: list[str], env: dict[str, str], n: int) -> list[tuple[int, str]]:
    """(cumulative microseconds, module) of the n top-level imports that cost most."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *args], env=env, cwd=ROOT, capture_output=True,
                          text=True)
    rows = []
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = line.removeprefix("import time:").split("|")
            if cumulative.strip().isdigit() and not name.startswith("   "):  # top level only (2+ spaces: nested)
                rows.append((int(cumulative), name.strip()))
    return sorted(rows, reverse=True)[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--top", type=int, default=6)
    ap.add_argument("--before", type=Path, default=None, help="an older checkout to compare with")
    ap.add_argument("--before-site", default="", help="packages the older checkout ran with, first on its path "
                    "(e.g. `pip install --no-deps --target DIR typer==0.29.2`)")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    roots = {"": ROOT} | ({" (before)": args.before.resolve()} if args.before else {})
    runs = [(name + tag, argv, root) for name, argv in CASES.items() for tag, root in roots.items()
            if not (tag and name.startswith("python"))]
    times: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in runs}
    site = {ROOT: ""} | ({args.before.resolve(): args.before_site} if args.before else {})
    for _ in range(args.warmup):
        for _, argv, root in runs:
            timed(argv, env, root, site[root])
    for _ in range(args.runs):  # interleaved: load from other jobs falls on every command alike
        for name, argv, root in runs:
            times[name].append(timed(argv, env, root, site[root]))
    print(f"{args.runs} runs each after {args.warmup} warm-up, interleaved; {os.cpu_count()} cores\n")
    print("| command | median s | best s | mean s | stdev s | CPU s (median) |")
    print("|---|---|---|---|---|---|")
    for name, both in times.items():
        t = [w for w, _ in both]
        print(f"| {name} | {statistics.median(t):.3f} | {min(t):.3f} | {statistics.mean(t):.3f} | "
              f"{statistics.stdev(t) if len(t) > 1 else 0:.3f} | {statistics.median(c for _, c in both):.3f} |")
    for name, argv in list(CASES.items())[1:]:
        print(f"\n{name}: top-level imports, cumulative ms: " +
              ", ".join(f"{mod} {us / 1000:.0f}" for us, mod in top_imports(argv, env, args.top)))


if __name__ == "__main__":
    main()
