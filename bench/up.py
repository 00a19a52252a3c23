"""Benchmark: what the Pulumi engine costs. `inferry up` (the real Pulumi CLI and engine, program inline) against
the direct driver (the same providers called in the program's order, no engine) on the same SSH hosts.

Run as root after `bash scripts/test.sh` built the tools: `python bench/up.py [--hosts 1 4 8] [--repeat 5]`.
Both sides are whole commands timed as a user runs them (process start, imports, SSH, health gates):
`inferry up STACK` and `python bench/up.py --direct STACKFILE`. Per round, interleaved: each tool's first apply
(from nothing: the previous round destroyed everything) then its no-op re-apply. Prints medians and bests, and
the ratio engine / direct (> 1: the engine's overhead).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODEL, API_KEY = "llama-3.1-8b-instruct", "sk-bench-4e9a1c7f2b6d08e3a5c1f7b9d2e64a80"  # 128 bits: the gateway checks
KEYS = ("bench-access", "bench-secret-" + "0" * 12)


@contextmanager
def fresh_hosts(network, names: list[str]) -> Iterator[list]:
    """Test hosts for one run (tests/support/hosts), removed afterwards whatever happens."""
    hosts = network.add_hosts(names)
    try:
        yield hosts
    finally:
        for h in hosts:
            network.remove_host(h)


@contextmanager
def bench_world(prefix: str, keys: tuple[str, str] = KEYS) -> Iterator[tuple[Path, Any, Any]]:
    """(a scratch folder, the test hosts' network, an S3 server the hosts reach with these keys), torn down
    after (the folder removed too: a bench's models are GiBs)."""
    import tempfile

    from tests.support.hosts.network import HostNetwork
    from tests.support.servers.s3 import S3Server

    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    with HostNetwork() as network:
        server = S3Server(tmp / "s3", *keys, network.gateway, 0).start()
        try:
            yield tmp, network, server
        finally:
            server.stop()
            shutil.rmtree(tmp, ignore_errors=True)


def deployment(hosts, server) -> dict:
    """vLLM on the hosts (process runtime, rolling, a load balancer when several), weights from the store."""
    return {
        "model": {"name": MODEL, "weights": MODEL},  # the key prefix in storage.bucket
        "engine": {"kind": "vllm", "max_model_len": 4096},
        "target": {"kind": "ssh", "runtime": "process", "health_timeout_s": 60, "private_key": {"env": "BENCH_SSH_KEY"},
                   "hosts": [{"address": h.address, "name": h.name, "host_key": h.host_key_line,
                              **({"private_address": h.address} if len(hosts) > 1 else {})} for h in hosts],
                   **({"gateway": {"host": hosts[0].name, "tls": "off", "http_port": 8080}} if len(hosts) > 1 else {})},
        "storage": {"endpoint": server.endpoint, "region": server.region, "bucket": "inferry-weights",
                    "access_key_id": {"env": "BENCH_S3_ACCESS"}, "secret_access_key": {"env": "BENCH_S3_SECRET"}},
        "provider": {"name": "bench", "region": "eu-test", "gpu": "H200", "price_per_gpu_hour": 3.0},
        "serving": {"port": 8000, "api_key": {"env": "BENCH_API_KEY"}},
    }


def direct(stack_file: str, destroy: bool) -> None:
    """The direct driver as one command: load the stack, apply (or destroy) with the providers."""
    from infra.checks import register_checks
    from infra.lifecycle.secrets import resolver
    from infra.stack.stackfile import load_stack
    from tests.support import ssh_direct as ssh_apply
    from infra.targets.ssh.plan import plan_deployment

    register_checks()
    stack = load_stack(stack_file)
    plan = plan_deployment(stack.deployment)
    if destroy:
        ssh_apply.destroy(plan, ssh_apply.stack_secrets(stack, resolver(stack)))
    else:
        ssh_apply.apply(plan, ssh_apply.stack_secrets(stack, resolver(stack)))


def timed(cmd: list[str], project, env: dict) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=project.folder, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    return seconds


def header(left: str, right: str) -> str:
    """The column heads of a two-tool table (bench/ssh.py prints the same)."""
    return (f"{'hosts':>5} {'run':>6} {left + ' median (best)':>26} {right + ' median (best)':>26} "
            f"{'ratio median':>12} {'ratio best':>10}")


def row(hosts: int, run: str, a: list[float], b: list[float]) -> str:
    """One line: each side's median (best) seconds, and a/b of the medians and of the bests."""
    ma, mb = statistics.median(a), statistics.median(b)
    return (f"{hosts:>5} {run:>6} {ma:>17.2f}s ({min(a):.2f}s) {mb:>17.2f}s ({min(b):.2f}s) "
            f"{ma / mb:>12.2f} {min(a) / min(b):>10.2f}")


def bench(network, server, tmp: Path, n: int, repeat: int) -> dict[str, list[float]]:
    """Seconds per round for each (tool, run) on n fresh hosts."""
    from tests.support.realengine import Project

    with fresh_hosts(network, [f"u{n}x{i}" for i in range(n)]) as hosts:
        project = Project(tmp / f"project-{n}")
        name = f"bench{n}"
        project.write_stack(name, deployment(hosts, server), {})
        stack_file = str(project.stack_file(name))
        env = {**project.env, "BENCH_SSH_KEY": network.client_key_text, "BENCH_API_KEY": API_KEY,
               "BENCH_S3_ACCESS": KEYS[0], "BENCH_S3_SECRET": KEYS[1]}
        py = [sys.executable, str(Path(__file__).resolve())]
        rows: dict[str, list[float]] = {k: [] for k in ("engine first", "engine no-op", "direct first",
                                                        "direct no-op")}
        for _ in range(repeat):
            for tool, cmd in (("engine", [*project.inferry_argv(), "up", name]),
                              ("direct", [*py, "--direct", stack_file])):
                rows[f"{tool} first"].append(timed(cmd, project, env))
                rows[f"{tool} no-op"].append(timed(cmd, project, env))
                if tool == "engine":
                    timed(["pulumi", "destroy", "--yes", "--stack", name], project,
                          {**env, "PULUMI_BACKEND_URL": f"file://{project.state}"})
                timed([*py, "--direct", stack_file, "--destroy"], project, env)  # weights too: a first apply is whole
        return rows


def main() -> None:
    """Print the table (or, with --direct, be the direct driver)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hosts", type=int, nargs="+", default=[1, 4, 8])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--direct", metavar="STACKFILE", help=argparse.SUPPRESS)
    p.add_argument("--destroy", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.direct:
        return direct(args.direct, args.destroy)
    from infra.storage.settings import StoreSettings
    from infra.storage.sync import push

    with bench_world("inferry-bench-up-") as (tmp, network, server):
        (server.root / "inferry-weights").mkdir(parents=True)
        model = tmp / "model"
        model.mkdir()
        (model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
        (model / "model.safetensors").write_bytes(os.urandom(8 << 20))
        push(StoreSettings(server.endpoint, server.region, "inferry-weights", *KEYS), model, MODEL, show=False)
        print(header("engine", "direct"))
        for n in args.hosts:
            rows = bench(network, server, tmp, n, args.repeat)
            for run in ("first", "no-op"):
                print(row(n, run, rows[f"engine {run}"], rows[f"direct {run}"]), flush=True)


if __name__ == "__main__":
    main()
