"""Benchmark: the SSH target's first apply and no-op re-apply vs pyinfra doing the same operations.

Run as root (it makes test hosts in network namespaces): `python bench/ssh.py [--hosts 1 4 8]`.
Same hosts, same run: inferry applies (first, then no-op), destroys, then pyinfra puts the same files (with the
same modes), runs the same fact probe, restart (only when a file changed) and health check. Weights excluded:
the model folder is put on each host beforehand. Prints seconds and ratios (inferry / pyinfra).
"""
from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from infra.stack.stackfile import parse_deployment  # noqa: E402
from infra.targets.ssh import apply as ssh_apply  # noqa: E402
from infra.targets.ssh import pool  # noqa: E402
from infra.targets.ssh.facts import probe_command  # noqa: E402
from infra.targets.ssh.plan import TargetPlan, plan_deployment  # noqa: E402
from infra.targets.ssh.runtime import script  # noqa: E402
from infra.targets.ssh.service import desired_files  # noqa: E402
from tests.support.hosts.network import HostNetwork  # noqa: E402

MODEL, API_KEY = "llama-3.1-8b-instruct", "sk-bench-" + "5" * 24
CACHE = "/var/lib/inferry/weights"


def deployment(hosts):
    """vLLM on the hosts, process runtime, weights already on the hosts (excluded from the timing)."""
    return parse_deployment({
        "model": {"name": MODEL, "weights": f"/srv/models/{MODEL}"},
        "engine": {"kind": "vllm", "max_model_len": 4096},
        "target": {"kind": "ssh", "runtime": "process", "health_timeout_s": 60, "private_key": {"env": "K"},
                   "hosts": [{"address": h.address, "name": h.name, "host_key": h.host_key_line} for h in hosts]},
        "storage": {"endpoint": "http://127.0.0.1:9", "region": "x", "bucket": "inferry-weights",
                    "access_key_id": {"env": "A"}, "secret_access_key": {"env": "S"}},
        "provider": {"name": "bench", "region": "eu-test", "gpu": "H200", "price_per_gpu_hour": 3.0},
        "serving": {"port": 8000, "api_key": {"env": "API"}}}, "bench")


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def inferry_run(plan: TargetPlan, secrets: dict) -> tuple[float, int]:
    """One apply from fresh connections; (seconds, remote writes + restarts)."""
    pool.close_all()
    out = {}
    seconds = timed(lambda: out.setdefault("r", ssh_apply.apply(plan, secrets)))
    pool.close_all()
    return seconds, out["r"].count("writes") + out["r"].count("restarts")


def pyinfra_run(hosts, plan: TargetPlan, secrets: dict, known_hosts: Path) -> float:
    """The same operations with pyinfra's API: probe, put each file, restart if any changed, health check."""
    from pyinfra.api import Config, Inventory, State
    from pyinfra.api.connect import connect_all
    from pyinfra.api.operation import add_op
    from pyinfra.api.operations import run_ops
    from pyinfra.operations import files, server

    def run() -> None:
        data = {"ssh_user": "root", "ssh_key": str(hosts[0].client_key_path), "ssh_known_hosts_file": str(known_hosts),
                "ssh_strict_host_key_checking": "yes"}
        state = State(inventory=Inventory(([(h.address, dict(data)) for h in hosts], {})), config=Config())
        connect_all(state)
        svc = plan.hosts[0].service
        add_op(state, server.shell, name="probe", commands=[probe_command(CACHE)])
        values = {f: secrets[f] for f in plan.secret_fields}
        puts = [add_op(state, files.put, name=f.path, src=io.StringIO(f.content), dest=f.path,
                       mode=f"{f.mode:o}", create_remote_dir=True) for f in desired_files(svc, values)]
        for h in state.inventory:
            changed = [p[h] for p in puts]
            add_op(state, server.shell, name="restart", commands=[svc.rt.restart()], host=h,
                   _if=lambda c=changed, h=h: any(m.did_change() for m in c) or not running(state, h, svc))
        health = f"set -- 8000 /health /v1/models {MODEL} 60; {script('health.sh')}"
        add_op(state, server.shell, name="health", commands=[f"printf '%s\\n' {API_KEY} | sh -c '{health_quoted(health)}'"])
        run_ops(state)
        for h in state.inventory:
            h.disconnect()

    return timed(run)


def running(state, host, svc) -> bool:
    """Whether the supervisor runs (pyinfra's fact: a command's output)."""
    from pyinfra.facts.server import Command

    return host.get_fact(Command, svc.rt.status()).strip() == "running"


def health_quoted(cmd: str) -> str:
    return cmd.replace("'", "'\\''")


def bench(network: HostNetwork, n: int, repeat: int) -> dict:
    """Times for n hosts: median of `repeat` rounds of (first, no-op) for each tool."""
    hosts = [network.add_host(f"b{n}x{i}") for i in range(n)]
    try:
        for h in hosts:
            h.exec(f"mkdir -p {CACHE}/{MODEL} && echo '{{}}' > {CACHE}/{MODEL}/config.json", check=True)
        known = Path(f"/tmp/inferry-bench-known-{n}")
        known.write_text("".join(f"{h.address} {h.host_key_line}\n" for h in hosts))
        plan = plan_deployment(deployment(hosts))
        secrets = {"target.private_key": hosts[0].client_key_text, "serving.api_key": API_KEY}
        rows = {"inferry first": [], "inferry no-op": [], "pyinfra first": [], "pyinfra no-op": []}
        for _ in range(repeat):
            first, _ = inferry_run(plan, secrets)
            noop, changes = inferry_run(plan, secrets)
            assert changes == 0, f"inferry no-op changed {changes} things"
            rows["inferry first"].append(first)
            rows["inferry no-op"].append(noop)
            ssh_apply.destroy(plan, secrets)
            pool.close_all()
            rows["pyinfra first"].append(pyinfra_run(hosts, plan, secrets, known))
            rows["pyinfra no-op"].append(pyinfra_run(hosts, plan, secrets, known))
            for h in hosts:  # stop pyinfra's engine and remove its files before the next round
                h.exec(f"{plan.hosts[0].service.rt.stop()}; rm -rf /etc/inferry")
        return {k: statistics.median(v) for k, v in rows.items()}
    finally:
        for h in hosts:
            network.remove_host(h)


def main() -> None:
    """Print the table."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--hosts", type=int, nargs="+", default=[1, 4, 8])
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    network = HostNetwork()
    try:
        print(f"{'hosts':>5} {'inferry first':>14} {'pyinfra first':>14} {'ratio':>6} "
              f"{'inferry no-op':>14} {'pyinfra no-op':>14} {'ratio':>6}")
        for n in args.hosts:
            r = bench(network, n, args.repeat)
            print(f"{n:>5} {r['inferry first']:>13.2f}s {r['pyinfra first']:>13.2f}s "
                  f"{r['inferry first'] / r['pyinfra first']:>6.2f} {r['inferry no-op']:>13.2f}s "
                  f"{r['pyinfra no-op']:>13.2f}s {r['inferry no-op'] / r['pyinfra no-op']:>6.2f}", flush=True)
    finally:
        network.close()


if __name__ == "__main__":
    main()
