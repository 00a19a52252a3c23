"""Benchmark: the least any `inferry up` can take, the Pulumi engine running a program with nothing in it.

    .venv/bin/python bench/pulumi_floor.py [--repeat 10]

Times whole processes, as bench/ssh.py does: a Python process that imports the Automation API and runs
`pulumi up` of an empty inline program on a local file backend, the way inferry runs its own (one
`pulumi version`, then `up --stack NAME`; outputs from the update's events), after a first run created
the stack, so every timed run is a no-op. Beside it, `python -c pass` and `pulumi version`. Takes the
Pulumi CLI from PATH, else from what scripts/tools.sh built. Prints median and best seconds.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.realengine import tools_path  # noqa: E402  (the CLI the suite built, as the other benches take it)

EMPTY_UP = """
import sys
from pulumi import automation as auto
from infra.lifecycle.eventstack import CheckedCommand, EventStack, Seen
from infra.lifecycle.pulumicli import check_pulumi

ws = auto.LocalWorkspace(work_dir=sys.argv[1], program=lambda: None, secrets_provider="passphrase",
                         project_settings=auto.ProjectSettings(name="floor", runtime="python"),
                         pulumi_command=CheckedCommand(*check_pulumi()))
stack = EventStack.open("floor", ws)
stack.seen = seen = Seen("up")
stack.run("up", on_event=seen, show_secrets=False)
"""


def timed(argv: list[str], env: dict[str, str]) -> float:
    """Seconds of one whole process; stops the bench when it fails."""
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"{argv[:3]} failed: {proc.stderr[-600:]}")
    return time.perf_counter() - t0


def main() -> None:
    """Print the table."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=10)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="inferry-floor-"))
    (work / "state").mkdir()
    env = {**os.environ, "PATH": tools_path(), "PYTHONPATH": str(ROOT),
           "PULUMI_BACKEND_URL": f"file://{work / 'state'}",
           "PULUMI_CONFIG_PASSPHRASE": "floor", "PULUMI_SKIP_UPDATE_CHECK": "true", "PULUMI_HOME": str(work / "home")}
    cases = {"python -c pass": [sys.executable, "-c", "pass"], "pulumi version": ["pulumi", "version"],
             "empty program, no-op up": [sys.executable, "-c", EMPTY_UP, str(work)]}
    timed(cases["empty program, no-op up"], env)  # creates the stack: the timed runs change nothing
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeat):  # interleaved: load from other jobs falls on every case alike
        for name, argv in cases.items():
            times[name].append(timed(argv, env))
    print(f"{args.repeat} runs each, interleaved; {os.cpu_count()} cores\n")
    print("| process | median s | best s |\n|---|---|---|")
    for name, t in times.items():
        print(f"| {name} | {statistics.median(t):.2f} | {min(t):.2f} |")


if __name__ == "__main__":
    main()
