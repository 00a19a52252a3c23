"""`inferry migrate` through the real Pulumi engine: two SSH stacks, two stores, no moment without an answer.

Each stack has its own host and its own S3 store with its own keys, all set as Pulumi secrets; only a's store
holds the model. A client polls both endpoints the whole time (tests/progharness.Poller). The destroy test
also runs alone: the `b_serving` fixture brings b up when no migration did.
"""
from __future__ import annotations

import hashlib

import pytest

from infra.lifecycle import probe
from infra.storage.settings import StoreSettings
from infra.storage.sync import push
from tests.support.progharness import Poller
from tests.support.realengine import Project, model_store, ssh_stack
from tests.support.ssh_env import BUCKET, FILES, MODEL, PREFIX

KEYS = {"a": ("mig-a-access", "mig-a-secret-" + "1" * 12), "b": ("mig-b-access", "mig-b-secret-" + "2" * 12)}
API = {"a": "sk-mig-a-" + "5" * 16, "b": "sk-mig-b-" + "6" * 16}


def deployment(host, server) -> dict:
    """One host, its own store; secrets by reference to the stack's Pulumi secrets."""
    return ssh_stack([host], server, provider=f"cloud-{host.name}")


@pytest.fixture(scope="module")
def stacks(host_network, s3_server_factory, tmp_path_factory, installed):
    tmp = tmp_path_factory.mktemp("real-migrate")
    project = Project(tmp / "project", installed[1])
    hosts, servers = {}, {}
    for name in ("a", "b"):  # only a's store holds the model
        servers[name] = model_store(s3_server_factory, host_network, KEYS[name], tmp, with_model=name == "a")
        hosts[name] = host_network.add_host(f"rm{name}")
        project.write_stack(name, deployment(hosts[name], servers[name]),
                            {"sshPrivateKey": host_network.client_key_text, "apiKey": API[name],
                             "s3AccessKey": KEYS[name][0], "s3SecretKey": KEYS[name][1]})
    yield project, hosts, servers
    for name in ("a", "b"):
        project.pulumi("destroy", "--yes", "--stack", name, check=False)
        host_network.remove_host(hosts[name])


def test_migrate_through_the_real_engine_without_downtime(stacks):
    project, hosts, servers = stacks
    project.inferry("up", "a")
    a_url, b_url = (f"http://{hosts[n].address}:8000" for n in ("a", "b"))
    poller = Poller([(a_url, API["a"]), (b_url, API["b"])])
    poller.start()
    r = project.inferry("migrate", "--from", "a", "--to", "b", "--destroy-source", "--drain-grace", "1", "--yes")
    samples = poller.finish()
    assert f"cutover done: a is destroyed; clients must use {b_url}/v1" in r.stdout, r.stdout
    assert "draining a: waiting until no request runs or waits for 1s" in r.stdout and "a idle for 1s" in r.stdout
    assert all(any(s) for s in samples), "a moment with no endpoint answering"
    assert samples[0] == (True, False) and (True, True) in samples and samples[-1] == (False, True)
    assert probe.chat_check(b_url + "/v1", API["b"], MODEL) and not probe.healthy(a_url + "/v1")
    for rel, data in FILES.items():  # b's store got the bytes a's store holds, checked here
        got = (servers["b"].root / BUCKET / PREFIX / rel).read_bytes()
        assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest()
    assert project.resources("a") == {} and len(project.resources("b")) == 9  # with the Deployment component


@pytest.fixture
def b_serving(stacks):
    """b up, as the migration leaves it; run alone, b's store gets the model as a migration copies it, then up."""
    project, hosts, servers = stacks
    if not project.resources("b"):
        model = tmp_model(servers["b"].root.parent / "model-b")
        push(StoreSettings(servers["b"].endpoint, servers["b"].region, BUCKET, *KEYS["b"]), model, PREFIX, show=False)
        project.inferry("up", "b")
    return stacks


def tmp_model(folder):
    """The test model's files in folder."""
    folder.mkdir(exist_ok=True)
    for rel, data in FILES.items():
        (folder / rel).write_bytes(data)
    return folder


def test_destroy_through_inferry_then_again_finds_nothing(b_serving):
    project, hosts, _ = b_serving
    r = project.inferry("destroy", "b", "--yes")
    assert "b destroyed: 8 delete" in r.stdout and "  deleted pulumi-python:dynamic/inferry:SshService ssh-rmb-service" \
        in r.stdout, r.stdout
    assert project.resources("b") == {} and not probe.healthy(f"http://{hosts['b'].address}:8000/v1")
    assert "b destroyed: no resources" in project.inferry("destroy", "b", "--yes").stdout
