"""examples/vms-from-my-provider, run as a user runs it: typed `pulumi up`, a VM from another provider's resource.

Real: the Pulumi CLI and engine, its file backend, the dynamic-provider plugin, two OpenSSH test hosts, an rclone
S3 store. The "other provider" is tests/support/cloud/my_cloud.py: its GpuVm allocates one of the test's hosts
(its address, user, host key and private key are Outputs the program hands to `Deployment`) and records, at each
allocate and release, whether an engine still served on the host. Stand-in: the GPU engine.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from infra.lifecycle import probe
from tests.conftest import ROOT
from tests.support.realengine import Project, model_store, tools_path
from tests.support.ssh_env import BUCKET, MODEL

pytestmark = [pytest.mark.component, pytest.mark.real_engine, pytest.mark.ssh_hosts, pytest.mark.s3]

EXAMPLE = ROOT / "examples" / "vms-from-my-provider"
CLOUD = ROOT / "tests" / "support" / "cloud"
API_KEY = "sk-example-" + "6" * 20
S3_KEYS = ("example-access-1", "example-secret-" + "9" * 16)
VM, SERVICE = "pulumi-python:dynamic/my-cloud:GpuVm", "pulumi-python:dynamic/inferry:SshService"


class Example:
    """The example's files in a project folder of their own, with this tree's venv and the stand-in cloud."""

    def __init__(self, folder: Path, env: dict[str, str]):
        folder.mkdir()
        self.project = Project(folder, env)  # the CLI, backend and PULUMI_HOME; its inferry program is not used
        for name in ("__main__.py", "infra"):
            (folder / name).unlink()
        for name in ("Pulumi.yaml", "__main__.py"):
            shutil.copy(EXAMPLE / name, folder / name)
        self.events = Path(env["MY_CLOUD_EVENTS"])

    def pulumi(self, *args: str, **kw):
        """`pulumi ARGS --stack dev` in the example's folder."""
        return self.project.pulumi(*args, "--stack", "dev", **kw)

    def config(self, values: dict[str, str], secret: bool = False) -> None:
        for key, value in values.items():
            self.pulumi("config", "set", *(["--secret"] if secret else []), key, stdin=value)

    def run(self, command: str, *args: str) -> list[tuple[str, str, str]]:
        """`pulumi up|destroy` as typed (--json: its engine events); (op, type, name) of each finished step."""
        r = self.pulumi(command, "--yes", "--skip-preview", "--json", *args, check=False)
        assert r.returncode == 0, f"pulumi {command} exited {r.returncode}:\n{diagnostics(r.stdout)}{r.stderr}"
        return steps(r.stdout)

    def output(self, name: str) -> str:
        return json.loads(self.pulumi("stack", "output", "--json").stdout)[name]

    def state(self, name: str) -> dict:
        return self.project.resources("dev")[name]["outputs"]

    def cloud_events(self) -> list[tuple[str, int, bool]]:
        """(allocate|release, host index, whether an engine served there then) of each GpuVm call."""
        lines = self.events.read_text().splitlines() if self.events.exists() else []
        return [(e["event"], e["index"], e["engine"]) for e in map(json.loads, lines)]


def steps(events: str) -> list[tuple[str, str, str]]:
    """The finished steps among a command's engine events, one JSON object a line (same steps included)."""
    found = []
    for line in events.splitlines():
        meta = json.loads(line).get("resOutputsEvent", {}).get("metadata")
        if meta:
            found.append((meta["op"], meta["type"], meta["urn"].rsplit("::", 1)[-1]))
    return found


def diagnostics(events: str) -> str:
    """The messages a failed command printed (its events' diagnostics, debug left out)."""
    found = [json.loads(line).get("diagnosticEvent") for line in events.splitlines() if line.startswith("{")]
    return "".join(d["prefix"] + d["message"] for d in found if d and d["severity"] != "debug")


def first(found: list[tuple[str, str, str]], op: str, typ: str) -> int:
    return next(i for i, (o, t, _) in enumerate(found) if o == op and t == typ)


@pytest.fixture
def example(host_network, s3_server_factory, tmp_path):
    server = model_store(s3_server_factory, host_network, S3_KEYS, tmp_path)
    hosts = host_network.add_hosts(["vm0", "vm1"])
    pool = tmp_path / "pool.json"
    pool.write_text(json.dumps([{"address": h.address, "user": h.user, "host_key": h.host_key_line,
                                 "private_key": host_network.client_key_text} for h in hosts]))
    # Typed `pulumi up` takes python from PATH (this venv: `inferry` installed from this tree); the stand-in
    # cloud is importable as a provider package is, by the program and by Pulumi's provider host alike.
    env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{tools_path()}", "PYTHONPATH": str(CLOUD),
           "MY_CLOUD_POOL": str(pool), "MY_CLOUD_EVENTS": str(tmp_path / "cloud-events.jsonl")}
    ex = Example(tmp_path / "project", env)
    ex.project.pulumi("stack", "init", "dev", "--secrets-provider", "passphrase")
    ex.config({"weightsEndpoint": server.endpoint, "weightsRegion": server.region, "weightsBucket": BUCKET})
    ex.config({"apiKey": API_KEY, "s3AccessKey": S3_KEYS[0], "s3SecretKey": S3_KEYS[1]}, secret=True)
    yield ex, hosts
    ex.pulumi("destroy", "--yes", check=False)
    for h in hosts:
        host_network.remove_host(h)


def test_a_vm_from_another_provider_serves_idles_moves_and_is_destroyed_in_order(example):
    ex, (vm0, vm1) = example
    ex.run("up")
    endpoint = ex.output("endpoint")
    assert endpoint == f"http://{vm0.address}:8000/v1" and ex.output("address") == vm0.address
    assert probe.chat_check(endpoint, API_KEY, MODEL)
    assert probe.get(endpoint + "/models", 3, None)[0] == 401
    assert ex.cloud_events() == [("allocate", 0, False)]
    service_dir = ex.state("llm-ssh-gpu-1-service")["service_dir"]
    assert vm0.path(service_dir).is_dir() and len(vm0.engine_starts()) == 1
    # the VM's key is kept for the service's later delete (no reference gives it back): encrypted, as its input
    assert set(ex.state("llm-ssh-gpu-1-service")["private_key"]) == {"4dabf18193072939515e22adb298388d", "ciphertext"}

    found = ex.run("up", "--expect-no-changes")
    assert {op for op, _, _ in found} == {"same"}, found
    assert len(vm0.engine_starts()) == 1 and ex.cloud_events() == [("allocate", 0, False)]

    ex.config({"hostIndex": "1"})  # the VM resource is replaced: another machine, another address
    found = ex.run("up")
    print("steps of the move:", [s for s in found if s[0] != "same"])  # the evidence, with -s
    assert ex.output("endpoint") == f"http://{vm1.address}:8000/v1"
    assert probe.chat_check(ex.output("endpoint"), API_KEY, MODEL)
    assert not probe.healthy(f"http://{vm0.address}:8000") and not vm0.path(service_dir).exists()
    # the new VM first, the engine moved, then the old VM released, with no engine left on it
    assert ex.cloud_events()[1:] == [("allocate", 1, False), ("release", 0, False)]
    assert first(found, "create-replacement", VM) < first(found, "create-replacement", SERVICE)
    assert first(found, "delete-replaced", SERVICE) < first(found, "delete-replaced", VM), found

    found = ex.run("destroy")
    print("steps of destroy:", found)
    assert first(found, "delete", SERVICE) < first(found, "delete", VM), found
    assert ex.cloud_events()[3:] == [("release", 1, False)]  # the engine was gone before the VM went
    assert not probe.healthy(f"http://{vm1.address}:8000") and not vm1.path(service_dir).exists()
    assert ex.project.resources("dev") == {}

