"""Benchmark: `inferry up` against pyinfra doing the same operations, both whole commands as automation runs them.

Run as root after `bash scripts/test.sh` built the tools and `.venv/bin/pip install -e '.[bench]'` installed
pyinfra: `python bench/ssh.py [--hosts 1 4 8] [--repeat 5]`.
inferry: `inferry up STACK` (the CLI, the real Pulumi engine, rolling rollout, no load balancer). pyinfra: its own
CLI, `pyinfra -y INVENTORY DEPLOY` (no diff-and-confirm phase, its gevent patching), running the same fact probe,
putting the same files with the same modes, restarting only when a file changed or the engine is down, then the
same health check. Weights excluded: the model folder is on each host beforehand. Per round, interleaved (the
order alternates): each tool's first apply (from nothing) then its no-op re-apply; everything is removed between
tools. Prints medians, bests and the ratios inferry / pyinfra.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.up import bench_world, fresh_hosts, header, row, timed  # noqa: E402

MODEL, API_KEY = "llama-3.1-8b-instruct", "sk-bench-" + "5" * 24
CACHE, WEIGHTS = "/var/lib/inferry/weights", f"/srv/models/{MODEL}"
KEYS = ("bench-access", "bench-secret-" + "0" * 12)
RUNS = ("first", "no-op")

DEPLOY = '''"""pyinfra deploy: probe, put the service files, restart if one changed or the engine is down, health check."""
import json
from pyinfra import host
from pyinfra.facts.server import Command
from pyinfra.operations import files, server

C = json.load(open({config!r}))
server.shell(name="probe", commands=[C["probe"]])
puts = [files.put(name=f["path"], src=f["src"], dest=f["path"], mode=f["mode"], create_remote_dir=True)
        for f in C["files"]]
server.shell(name="restart", commands=[C["restart"]],
             _if=lambda: any(p.did_change() for p in puts) or host.get_fact(Command, C["status"]).strip() != "running")
server.shell(name="health", commands=[C["health"]])
'''


def deployment(hosts, server) -> dict:
    """vLLM on the hosts: process runtime, rolling (the default), weights already on each host."""
    return {
        "model": {"name": MODEL, "weights": WEIGHTS},
        "engine": {"kind": "vllm", "max_model_len": 4096},
        "target": {"kind": "ssh", "runtime": "process", "health_timeout_s": 60, "weights_cache": CACHE,
                   "private_key": {"config": "sshPrivateKey"},
                   "hosts": [{"address": h.address, "name": h.name, "host_key": h.host_key_line} for h in hosts]},
        "storage": {"endpoint": server.endpoint, "region": server.region, "bucket": "inferry-weights",
                    "access_key_id": {"config": "s3AccessKey"}, "secret_access_key": {"config": "s3SecretKey"}},
        "provider": {"name": "bench", "region": "eu-test", "gpu": "H200", "price_per_gpu_hour": 3.0},
        "serving": {"port": 8000, "api_key": {"config": "apiKey"}},
    }


def pyinfra_folder(folder: Path, hosts, stack_file: Path, key_path: Path) -> tuple[list[str], str]:
    """Write pyinfra's inventory, deploy and the files it puts (what inferry renders); returns its command and
    the shell command that stops its engine and removes its files."""
    from infra.checks import register_checks
    from infra.stack.stackfile import load_stack
    from infra.targets.ssh.facts import probe_command
    from infra.targets.ssh.plan import plan_deployment
    from infra.targets.ssh.runtime import script
    from infra.targets.ssh.service import desired_files

    register_checks()
    plan = plan_deployment(load_stack(str(stack_file)).deployment)
    svc = plan.hosts[0].service
    folder.mkdir(parents=True)
    (folder / "known_hosts").write_text("".join(f"{h.address} {h.host_key_line}\n" for h in hosts))
    data = {"ssh_user": "root", "ssh_key": str(key_path), "ssh_known_hosts_file": str(folder / "known_hosts"),
            "ssh_strict_host_key_checking": "yes"}
    (folder / "inventory.py").write_text(f"hosts = {[(h.address, data) for h in hosts]!r}\n")
    puts = []
    for i, f in enumerate(desired_files(svc, {"serving.api_key": API_KEY})):
        src = folder / f"file{i}"
        src.write_text(f.content)
        src.chmod(0o600)
        puts.append({"path": f.path, "src": str(src), "mode": f"{f.mode:o}"})
    health = f"set -- http://127.0.0.1:8000 /health /v1/models {MODEL} 60; {script('health.sh')}".replace("'", "'\\''")
    config = {"probe": probe_command(CACHE, docker=svc.runtime == "docker"), "files": puts,
              "restart": svc.rt.restart(), "status": svc.rt.status(),
              "health": f"printf '%s\\n' {API_KEY} | sh -c '{health}'"}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "deploy.py").write_text(DEPLOY.format(config=str(folder / "config.json")))
    return [str(Path(sys.executable).parent / "pyinfra"), "-y", "inventory.py", "deploy.py"], \
        f"{svc.rt.stop()}; rm -rf {svc.service_dir}"


class Side:
    """One tool's command in its folder, and how to remove what it made."""

    def __init__(self, name: str, cmd: list[str], folder, env: dict, reset):
        self.name, self.cmd, self.folder, self.env, self.reset = name, cmd, folder, env, reset

    def time(self) -> float:
        """Seconds of one run of the command, as a whole process."""
        return timed(self.cmd, self, self.env)


def bench(network, server, tmp: Path, n: int, repeat: int) -> dict[str, list[float]]:
    """Seconds per round for each (tool, run) on n fresh hosts."""
    from tests.support.realengine import Project

    with fresh_hosts(network, [f"s{n}x{i}" for i in range(n)]) as hosts:
        for h in hosts:
            h.exec(f"mkdir -p {CACHE}/{MODEL} && echo '{{}}' > {CACHE}/{MODEL}/config.json", check=True)
        project, name = Project(tmp / f"project-{n}"), f"bench{n}"
        project.write_stack(name, deployment(hosts, server), {"sshPrivateKey": network.client_key_text,
                                                              "apiKey": API_KEY, "s3AccessKey": KEYS[0],
                                                              "s3SecretKey": KEYS[1]})
        key = tmp / "client_key"
        key.write_text(network.client_key_text)
        key.chmod(0o600)
        pyfolder = tmp / f"pyinfra-{n}"
        pycmd, stop = pyinfra_folder(pyfolder, hosts, project.stack_file(name), key)

        def destroy_inferry() -> None:
            timed(["pulumi", "destroy", "--yes", "--stack", name], project,
                  {**project.env, "PULUMI_BACKEND_URL": f"file://{project.state}"})

        def clean_hosts() -> None:
            for h in hosts:
                h.exec(stop, check=True)

        sides = [Side("inferry", [*project.inferry_argv(), "up", name], project.folder, project.env, destroy_inferry),
                 Side("pyinfra", pycmd, pyfolder, {**project.env}, clean_hosts)]
        rows: dict[str, list[float]] = {f"{s.name} {r}": [] for s in sides for r in RUNS}
        for i in range(repeat):
            for side in sides if i % 2 == 0 else sides[::-1]:
                for run in RUNS:
                    rows[f"{side.name} {run}"].append(side.time())
                side.reset()
        return rows


def main() -> None:
    """Print the table."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hosts", type=int, nargs="+", default=[1, 4, 8])
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    with bench_world("inferry-bench-ssh-", KEYS) as (tmp, network, server):
        print(header("inferry up", "pyinfra -y"))
        for n in args.hosts:
            rows = bench(network, server, tmp, n, args.repeat)
            for run in RUNS:
                print(row(n, run, rows[f"inferry {run}"], rows[f"pyinfra {run}"]), flush=True)

if __name__ == "__main__":
    main()
