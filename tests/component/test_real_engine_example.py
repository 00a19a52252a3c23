"""examples/vms-from-my-provider, run as a user runs it: typed `pulumi up`, a VM from another provider's resource.

Real: the Pulumi CLI and engine, its file backend, the dynamic-provider plugin, two OpenSSH test hosts, an rclone
S3 store. The "other provider" is tests/support/cloud/my_cloud.py: its GpuVm allocates one of the test's hosts
(its address, user, host key and private key are Outputs the program hands to `Deployment`) and records, at each
allocate and release, whether an engine still served on the host. Stand-in: the GPU engine.
"""
from __future__ import annotations

import json

import pytest

from infra.lifecycle import probe
from tests.conftest import ROOT
from tests.support.example import Example, example_env, first
from tests.support.realengine import model_store
from tests.support.ssh_env import BUCKET, MODEL

pytestmark = [pytest.mark.component, pytest.mark.real_engine, pytest.mark.ssh_hosts, pytest.mark.s3]

EXAMPLE = ROOT / "examples" / "vms-from-my-provider"
API_KEY = "sk-example-" + "6" * 20
S3_KEYS = ("example-access-1", "example-secret-" + "9" * 16)
VM, SERVICE = "pulumi-python:dynamic/my-cloud:GpuVm", "pulumi-python:dynamic/inferry:SshService"


def vm_events(ex: Example) -> list[tuple[str, int, bool]]:
    """(allocate|release, host index, whether an engine served there then) of each GpuVm call."""
    return [(e["event"], e["index"], e["engine"]) for e in ex.cloud_events()]


@pytest.fixture
def example(host_network, s3_server_factory, tmp_path, installed):
    server = model_store(s3_server_factory, host_network, S3_KEYS, tmp_path)
    hosts = host_network.add_hosts(["vm0", "vm1"])
    pool = tmp_path / "pool.json"
    pool.write_text(json.dumps([{"address": h.address, "user": h.user, "host_key": h.host_key_line,
                                 "private_key": host_network.client_key_text} for h in hosts]))
    # Typed `pulumi up` runs the example's .venv (the wheel's); the stand-in cloud is importable as a provider
    # package is, by the program and by Pulumi's provider host alike.
    env = example_env(MY_CLOUD_POOL=str(pool), MY_CLOUD_EVENTS=str(tmp_path / "cloud-events.jsonl"))
    ex = Example(EXAMPLE, tmp_path / "project", installed[1], env)
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
    assert vm_events(ex) == [("allocate", 0, False)]
    service_dir = ex.state("llm-ssh-gpu-1-service")["service_dir"]
    assert vm0.path(service_dir).is_dir() and len(vm0.engine_starts()) == 1
    # the VM's key is kept for the service's later delete (no reference gives it back): encrypted, as its input
    assert set(ex.state("llm-ssh-gpu-1-service")["private_key"]) == {"4dabf18193072939515e22adb298388d", "ciphertext"}

    found = ex.run("up", "--expect-no-changes")
    assert {op for op, _, _ in found} == {"same"}, found
    assert len(vm0.engine_starts()) == 1 and vm_events(ex) == [("allocate", 0, False)]

    ex.config({"hostIndex": "1"})  # the VM resource is replaced: another machine, another address
    found = ex.run("up")
    print("steps of the move:", [s for s in found if s[0] != "same"])  # the evidence, with -s
    assert ex.output("endpoint") == f"http://{vm1.address}:8000/v1"
    assert probe.chat_check(ex.output("endpoint"), API_KEY, MODEL)
    assert not probe.healthy(f"http://{vm0.address}:8000") and not vm0.path(service_dir).exists()
    # the new VM first, the engine moved, then the old VM released, with no engine left on it
    assert vm_events(ex)[1:] == [("allocate", 1, False), ("release", 0, False)]
    assert first(found, "create-replacement", VM) < first(found, "create-replacement", SERVICE)
    assert first(found, "delete-replaced", SERVICE) < first(found, "delete-replaced", VM), found

    found = ex.run("destroy")
    print("steps of destroy:", found)
    assert first(found, "delete", SERVICE) < first(found, "delete", VM), found
    assert vm_events(ex)[3:] == [("release", 1, False)]  # the engine was gone before the VM went
    assert not probe.healthy(f"http://{vm1.address}:8000") and not vm1.path(service_dir).exists()
    assert ex.project.resources("dev") == {}

