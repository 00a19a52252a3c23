"""The default path end to end: the real Pulumi engine (`inferry up`) puts the engine container on a host with
its own Docker engine; `inferry status` reports a crash Docker recovered from; destroy removes the container."""
from __future__ import annotations

import json
import time

import pytest

from infra.lifecycle import probe
from tests.support.realengine import Project, model_store, ssh_stack
from tests.support.ssh_env import MODEL
from tests.targets.ssh.test_ssh_docker import container

pytestmark = pytest.mark.docker  # the host runs its own Docker engine (real_engine and the rest by fixture)
API_KEY = "sk-real-docker-" + "2" * 20
KEYS = ("rd-access-key", "rd-secret-key-" + "3" * 12)


@pytest.fixture(scope="module")
def stack(host_network, s3_server_factory, tmp_path_factory, installed):
    tmp = tmp_path_factory.mktemp("real-docker")
    server = model_store(s3_server_factory, host_network, KEYS, tmp)
    (h,) = host_network.add_hosts(["rdk"], docker=True)
    project = Project(tmp / "project", installed[1])
    project.write_stack("dock", ssh_stack([h], server, runtime="docker"), {
        "sshPrivateKey": host_network.client_key_text, "apiKey": API_KEY, "s3AccessKey": KEYS[0],
        "s3SecretKey": KEYS[1]})
    yield project, h
    project.pulumi("destroy", "--yes", "--stack", "dock", check=False)
    host_network.remove_host(h)


@pytest.fixture
def up(stack):
    """The stack up, as the first test leaves it: brought up here when a later test runs alone."""
    project, _ = stack
    if not project.resources("dock"):
        project.inferry("up", "dock")
    return stack


def test_up_runs_the_container_and_a_second_up_keeps_it(stack):
    project, h = stack
    project.inferry("up", "dock")
    first = container(h)
    assert first["Config"]["Image"] == "vllm/vllm-openai:v0.33.0" and first["State"]["Running"]
    assert probe.chat_check(f"http://{h.address}:8000/v1", API_KEY, MODEL)
    r = project.inferry("up", "dock")
    assert "unchanged" in r.stdout and " updated " not in r.stdout
    assert container(h)["Id"] == first["Id"] and container(h)["State"]["StartedAt"] == first["State"]["StartedAt"]


def test_status_shows_a_crash_docker_recovered_from(up):
    project, h = up
    h.exec(f"kill -KILL {container(h)['State']['Pid']}", check=True)
    deadline = time.monotonic() + 30
    while not (container(h)["RestartCount"] == 1 and probe.healthy(f"http://{h.address}:8000/v1")):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    r = project.inferry("status", "dock")
    assert f"http://{h.address}:8000/v1  healthy" in r.stdout
    assert f"host {h.name}: engine running since " in r.stdout
    assert "restarted 1 time since the last apply" in r.stdout, r.stdout


def test_destroy_removes_the_container_and_says_what_it_removed_from_the_host(up):
    project, h = up
    held = h.exec("ls -d /etc/inferry /var/lib/inferry/weights/*", check=True).stdout.split()
    r = project.inferry("destroy", "dock", "--yes")
    assert "dock destroyed:" in r.stdout and container(h) == {}
    assert h.exec("ls -A /etc/inferry /var/lib/inferry 2>/dev/null").stdout == ""
    # What it printed, and kept on file, is what the host's disk held before and lacks now.
    line = next(x for x in r.stdout.splitlines() if x.startswith(f"host {h.name}: removed "))
    assert sorted(line.split(": removed ", 1)[1].split(", ")) == sorted(held), (line, held)
    (kept,) = (project.folder / ".inferry" / "records").glob("dock-destroyed-*.json")
    (machine,) = json.loads(kept.read_text())["machines"]
    assert sorted(machine["removed"]) == sorted(held) and machine["left"] == []
