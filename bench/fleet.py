"""Benchmark: a fleet whose engines take time to load. `inferry up` against `pyinfra -y` doing the same work, as
whole commands, at several fleet sizes; and how first-apply time grows with the number of hosts.

Run as root after `bash scripts/test.sh` built the tools and `.venv/bin/pip install -e '.[bench]'` installed
pyinfra: `python bench/fleet.py [--hosts 1 8 32 64] [--engine-start-s 20] [--repeat 3] [--runs first]`.
Each host's stand-in engine takes --engine-start-s to answer after it starts (a model's load), as a real engine
does. Per round, interleaved (the order alternates): each tool's first apply (from nothing), its no-op re-apply,
and a rolling change (an engine option changed: inferry with `max_unavailable: 25%`; pyinfra has no batch
rollout, so its row is `--parallel` with the same batch size, which runs each operation on that many hosts at a
time and so restarts every engine within seconds: the cost of the change, not the same guarantee of replicas
left serving); everything is removed between tools. Weights are on each host beforehand (bench/ssh.py's
set-up). Prints medians (best), the ratios inferry / pyinfra, and for each tool `first apply, N hosts / 1 host: R`
(R the ratio of first-apply medians: 1.0 means a fleet comes up as fast as one host).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.ssh import API_KEY, CACHE, KEYS, MODEL, Side, deployment, pyinfra_folder  # noqa: E402
from bench.up import bench_world, fresh_hosts, header, row, timed  # noqa: E402

RUNS = ("first", "no-op", "rolling")
BATCH = "25%"


def _batch(n: int) -> int:
    from infra.targets.ssh.plan import batch_size

    return batch_size(BATCH, n)


def sides(network, server, tmp: Path, hosts, start_s: float) -> list[tuple[Side, Side]]:
    """(tool, tool after the change) for inferry and pyinfra on these hosts."""
    from tests.support.realengine import Project

    n = len(hosts)
    project, name = Project(tmp / f"project-{n}"), f"fleet{n}"
    d = deployment(hosts, server)
    d["target"]["max_unavailable"] = BATCH
    secrets = {"sshPrivateKey": network.client_key_text, "apiKey": API_KEY, "s3AccessKey": KEYS[0],
               "s3SecretKey": KEYS[1]}
    project.write_stack(name, d, secrets)
    changed = {**d, "engine": {**d["engine"], "max_num_seqs": 64}}
    key = tmp / "client_key"
    key.write_text(network.client_key_text)
    key.chmod(0o600)
    pycmd, stop = pyinfra_folder(tmp / f"pyinfra-{n}", hosts, project.stack_file(name), key)
    project.write_stack(f"{name}-b", changed, secrets)  # only for pyinfra's files: never deployed by inferry
    pycmd2, _ = pyinfra_folder(tmp / f"pyinfra-{n}-b", hosts, project.stack_file(f"{name}-b"), key)
    pycmd2 = [*pycmd2[:2], "--parallel", str(_batch(n)), *pycmd2[2:]]

    def destroy() -> None:
        project.set_deployment(name, d)
        timed(["pulumi", "destroy", "--yes", "--stack", name], project,
              {**project.env, "PULUMI_BACKEND_URL": f"file://{project.state}"})

    def clean() -> None:
        for h in hosts:
            h.exec(stop, check=True)

    def change() -> None:
        project.set_deployment(name, changed)

    inferry = Side("inferry", [*project.inferry_argv(), "up", name], project.folder, project.env, destroy)
    inferry.change = change  # type: ignore[attr-defined]
    pyinfra = Side("pyinfra", pycmd, tmp / f"pyinfra-{n}", dict(project.env), clean)
    pyinfra.change = lambda: None  # type: ignore[attr-defined]
    return [(inferry, inferry), (pyinfra, Side("pyinfra", pycmd2, tmp / f"pyinfra-{n}-b", dict(project.env), clean))]


def bench(network, server, tmp: Path, n: int, repeat: int, start_s: float,
          runs: tuple[str, ...] = RUNS) -> dict[str, list[float]]:
    """Seconds per round for each (tool, run) on n fresh hosts whose engines take start_s to load."""
    with fresh_hosts(network, [f"f{n}x{i}" for i in range(n)]) as hosts:
        for h in hosts:
            h.exec(f"mkdir -p {CACHE}/{MODEL} && echo '{{}}' > {CACHE}/{MODEL}/config.json", check=True)
            h.set_standin(startup_s=start_s)
        pairs = sides(network, server, tmp, hosts, start_s)
        rows: dict[str, list[float]] = {f"{a.name} {r}": [] for a, _ in pairs for r in runs}
        for i in range(repeat):
            for side, after in pairs if i % 2 == 0 else pairs[::-1]:
                rows[f"{side.name} first"].append(side.time())
                if "no-op" in runs:
                    rows[f"{side.name} no-op"].append(side.time())
                if "rolling" in runs:
                    side.change()  # type: ignore[attr-defined]
                    rows[f"{side.name} rolling"].append(after.time())
                side.reset()
        return rows


def main() -> None:
    """Print the tables and the first-apply curve."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hosts", type=int, nargs="+", default=[1, 8, 32, 64])
    p.add_argument("--engine-start-s", type=float, default=20.0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--runs", nargs="+", choices=RUNS, default=list(RUNS),
                   help="which runs to time (a first apply always runs: the others start from it)")
    args = p.parse_args()
    runs = tuple(r for r in RUNS if r in {"first", *args.runs})
    print(f"engine start {args.engine_start_s:g} s, {args.repeat} round(s), load average before: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    firsts: dict[str, dict[int, float]] = {"inferry": {}, "pyinfra": {}}
    with bench_world("inferry-bench-fleet-", KEYS) as (tmp, network, server):
        print(header("inferry up", "pyinfra -y"), flush=True)
        for n in args.hosts:
            rows = bench(network, server, tmp, n, args.repeat, args.engine_start_s, runs)
            for run in runs:
                print(row(n, run, rows[f"inferry {run}"], rows[f"pyinfra {run}"]), flush=True)
            for tool in firsts:
                firsts[tool][n] = statistics.median(rows[f"{tool} first"])
    base = min(args.hosts)
    for tool, by_n in firsts.items():
        for n in args.hosts:
            if n != base:
                label = "" if tool == "inferry" else f" ({tool})"
                print(f"first apply, {n} hosts / {base} host: {by_n[n] / by_n[base]:.2f}{label}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
