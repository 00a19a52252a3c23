"""`inferry record` on a real deployment: two docker hosts, a gateway on the first, read back with the CLI a
user runs. Each fact is checked against what the hosts say to a command run here (nvidia-smi, `docker inspect`,
the disk), not against inferry's own reports. The tests run in order on one deployment; each brings it to the
state it needs when run alone.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys

import pytest
import yaml

from infra.gateway.caddy import key_id
from tests.conftest import ROOT
from tests.support import ssh_direct as ssh_apply
from tests.support.ssh_env import (API_KEY, fresh_sessions, plan_for, raw_deployment, secrets,  # noqa: F401
                                   weights_store)
from infra.stack.stackfile import parse_deployment

pytestmark = [pytest.mark.docker, pytest.mark.privacy, pytest.mark.gateway]


class Fleet:
    """Two docker hosts behind a plain-HTTP gateway on the first; the stack as a file the CLI reads."""

    def __init__(self, hosts, store, folder):
        self.hosts, self.store = hosts, store
        self.raw = raw_deployment(hosts, store, runtime="docker", gateway={"host": hosts[0].name, "tls": "off",
                                                                          "http_port": 8080})
        self.raw["target"]["hosts"][1]["private_address"] = hosts[1].address
        store_host = store.endpoint.split("://")[1].split(":")[0]
        self.raw["policy"] = {"sub_processors": ["test-cloud", store_host, "docker.io", "dl.cloudsmith.io"]}
        self.path = folder / "Pulumi.privacy.yaml"
        self.path.write_text(yaml.safe_dump({"config": {"inferry:deployment": self.raw}}))
        self.d = parse_deployment(self.raw, "privacy")

    def apply(self):
        return ssh_apply.apply(plan_for(self.d), secrets(self.hosts, self.store))

    def record(self, *args: str) -> subprocess.CompletedProcess:
        s = secrets(self.hosts, self.store)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TEST_SSH_KEY": s["target.private_key"],
               "TEST_API_KEY": API_KEY, "TEST_S3_ACCESS": self.store.access_key, "TEST_S3_SECRET": self.store.secret_key}
        return subprocess.run([sys.executable, "-m", "cli.main", "record", str(self.path), *args], cwd=ROOT,
                              capture_output=True, text=True, env=env, timeout=180)


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def engine_env(host) -> list[str]:
    cid = host.exec("docker ps -q --filter label=com.docker.compose.service=engine").stdout.split()[0]
    return json.loads(host.exec(f"docker inspect {cid}", check=True).stdout)[0]["Config"]["Env"]


@pytest.fixture(scope="module")
def fleet(host_network, weights_store, tmp_path_factory):
    f = Fleet(host_network.add_hosts(["pv1", "pv2"], docker=True), weights_store, tmp_path_factory.mktemp("rec"))
    for h in f.hosts:
        h.set_standin(startup_s=0.5)
    f.first_applied = utc_now()
    f.apply()
    f.apply()  # a second apply keeps each key's first date
    yield f
    ssh_apply.destroy(plan_for(f.d), secrets(f.hosts, weights_store))
    for h in f.hosts:
        host_network.remove_host(h)


def test_the_record_matches_the_hosts_and_check_passes(fleet):
    p = fleet.record("--json", "--check")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "matches the stack's policy (2 replica(s) read)" in p.stderr
    r = json.loads(p.stdout)
    assert (r["provider"], r["region"]) == ("test-cloud", "eu-test")
    assert [s["name"] for s in r["sub_processors"]] == fleet.raw["policy"]["sub_processors"]
    for host, rep in zip(fleet.hosts, r["replicas"]):
        smi = host.exec("nvidia-smi --query-gpu=name --format=csv,noheader", check=True).stdout.split("\n")
        assert rep["gpus"] == [g for g in smi if g] and rep["error"] is None, rep
        running = dict(e.split("=", 1) for e in engine_env(host))
        assert rep["env"] == {k: running[k] for k in r["telemetry_off"]} == r["telemetry_off"], rep
        assert API_KEY not in p.stdout and fleet.store.secret_key not in p.stdout
        model_dir = plan_for(fleet.d).hosts[0].weights[0].model_dir
        assert model_dir in rep["data"] and fleet.d.target.service_dir in rep["data"], rep
    gw, other = r["replicas"]
    (when,) = gw["keys"].values()  # when the key was first accepted: at the first apply, and kept since
    assert list(gw["keys"]) == [key_id(API_KEY)] and other["keys"] == {}
    assert fleet.first_applied <= when <= r["read_at"], (fleet.first_applied, when)
    assert any(a.endswith(":8080") for a in gw["listening"]) and not any(a.endswith(":8000") for a in gw["listening"])
    assert f"{fleet.hosts[1].address}:8000" in other["listening"], other  # the private address, behind the gateway
    md = fleet.record().stdout
    assert "# Record of processing: privacy" in md and "| docker.io | run-time download |" in md


def test_request_logging_turned_on_by_hand_is_named_by_host_and_flag(fleet):
    host = fleet.hosts[1]
    compose = f"{fleet.d.target.service_dir}/compose.yaml"
    host.exec(f"sed -i 's/^    command: \\[/    command: [\"--enable-log-requests\", /' {compose} && "
              f"docker compose -f {compose} up -d --force-recreate engine", check=True, timeout=120)
    try:
        p = fleet.record("--check")
        assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
        bullets = [line for line in p.stderr.splitlines() if line.startswith("  • ")]
        assert len(bullets) == 1, p.stderr
        assert f"host {host.name}: the engine runs with --enable-log-requests" in bullets[0], p.stderr
    finally:
        fleet.apply()  # as the printed fix says: `inferry up` starts it as rendered
    assert fleet.record("--check").returncode == 0


def test_after_destroy_no_data_folder_is_left_on_any_host(fleet):
    ssh_apply.destroy(plan_for(fleet.d), secrets(fleet.hosts, fleet.store))
    try:
        r = json.loads(fleet.record("--json").stdout)
        folders = [fleet.d.target.service_dir, plan_for(fleet.d).hosts[0].weights[0].model_dir]
        for host, rep in zip(fleet.hosts, r["replicas"]):
            left = host.exec(f"for f in {' '.join(folders)}; do [ -e $f ] && echo $f; done; true").stdout.split()
            assert left == [] and rep["data"] == [] and "no engine process" in rep["error"], (host.name, left, rep)
        assert fleet.record("--check").returncode == 1  # nothing runs: nothing can be shown to match the policy
    finally:
        fleet.apply()
