"""Benchmark (not a test): CLI start-up as a user sees it, whole processes, hyperfine-style.

    .venv/bin/python bench/startup.py --runs 20

For each command: `--warmup` untimed runs, then `--runs` timed ones; prints median, best, mean
and standard deviation, and the modules that cost most to import (`python -X importtime`,
cumulative, one run). A bare `python -c pass` is the floor. Target: `inferry plan` and
`inferry validate` <= 0.2 s.
"""
from __future__ import annotations

import argparse
import os
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


def timed(args: list[str], env: dict[str, str]) -> float:
    """Seconds one whole process takes; exits the bench when it fails."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    secs = time.perf_counter() - t0
    if proc.returncode:
        sys.exit(f"{' '.join(args)} failed: {proc.stderr.strip()[-400:]}")
    return secs


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
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.warmup):
        for argv in CASES.values():
            timed(argv, env)
    for _ in range(args.runs):  # interleaved: load from other jobs falls on every command alike
        for name, argv in CASES.items():
            times[name].append(timed(argv, env))
    print(f"{args.runs} runs each after {args.warmup} warm-up, interleaved; {os.cpu_count()} cores\n")
    print("| command | median s | best s | mean s | stdev s |")
    print("|---|---|---|---|---|")
    for name, t in times.items():
        print(f"| {name} | {statistics.median(t):.3f} | {min(t):.3f} | {statistics.mean(t):.3f} | "
              f"{statistics.stdev(t) if len(t) > 1 else 0:.3f} |")
    for name, argv in list(CASES.items())[1:]:
        print(f"\n{name}: top-level imports, cumulative ms: " +
              ", ".join(f"{mod} {us / 1000:.0f}" for us, mod in top_imports(argv, env, args.top)))


if __name__ == "__main__":
    main()
