"""Hosts that restart under a real `inferry up` (the real Pulumi CLI and engine, OpenSSH test hosts, an rclone
store, Docker engines on the hosts): the Docker daemon restarted during a rolling change, and a host rebooted.

A reboot kills every process of the host (sshd, dockerd, containers, engines) and starts what its boot starts:
sshd and dockerd. Every check reads the hosts (containers, engine starts, processes) or asks the engine over
HTTP, not inferry's own counters. Each test brings its stack up when no test before it did, so each passes alone.
"""
from __future__ import annotations

import re
import time
from contextlib import contextmanager

import pytest

from infra.lifecycle import probe
from tests.support.faults import reboot
from tests.support.hosts import docker
from tests.support.realengine import Project, model_store, ssh_stack
from tests.support.ssh_env import MODEL
from tests.targets.ssh.test_ssh_docker import container

pytestmark = pytest.mark.faults
API_KEY = "sk-reboot-" + "7" * 20
KEYS = ("rb-access-key", "rb-secret-key-" + "8" * 12)


class Fleet:
    """Hosts, one store and one project whose stack STACK serves on every host (rolling, one at a time)."""

    def __init__(self, hosts, server, project: Project, stack: str, runtime: str):
        self.hosts, self.server, self.project, self.stack, self.runtime = hosts, server, project, stack, runtime

    def deployment(self, **engine) -> dict:
        """The stack's deployment, with engine options changed."""
        d = ssh_stack(self.hosts, self.server, runtime=self.runtime, health_timeout_s=60)
        d["engine"].update(engine)
        return d

    def url(self, i: int) -> str:
        """The i-th host's engine endpoint."""
        return f"http://{self.hosts[i].address}:8000/v1"

    def up(self) -> "Fleet":
        """The stack up as the first test leaves it, every engine starting fast again."""
        for h in self.hosts:
            h.set_standin()
        if not self.project.resources(self.stack):
            self.project.inferry("up", self.stack)
        return self

    def serves(self, i: int) -> bool:
        """Host i's engine answers a chat completion on its own port (with the stack's API key)."""
        return bool(probe.chat_check(self.url(i), API_KEY, MODEL))


@contextmanager
def _fleet(host_network, s3_server_factory, tmp_path_factory, bin_dir, names, stack, runtime):
    """A Fleet on new hosts, up; destroyed and its hosts removed afterwards."""
    tmp = tmp_path_factory.mktemp(stack)
    server = model_store(s3_server_factory, host_network, KEYS, tmp)
    hosts = host_network.add_hosts(names, docker=runtime == "docker")
    f = Fleet(hosts, server, Project(tmp / "project", bin_dir), stack, runtime)
    f.project.write_stack(stack, f.deployment(), {"sshPrivateKey": host_network.client_key_text, "apiKey": API_KEY,
                                                  "s3AccessKey": KEYS[0], "s3SecretKey": KEYS[1]})
    try:
        yield f.up()
    finally:
        f.project.pulumi("destroy", "--yes", "--stack", f.stack, check=False)
        for h in f.hosts:
            host_network.remove_host(h)


@pytest.fixture(scope="module")
def docked(host_network, s3_server_factory, tmp_path_factory, installed):
    """Two hosts with their own Docker engines, stack `rbdock` (docker runtime), up."""
    with _fleet(host_network, s3_server_factory, tmp_path_factory, installed[1], ["rbd1", "rbd2"], "rbdock",
                "docker") as f:
        yield f


@pytest.fixture(scope="module")
def bare(host_network, s3_server_factory, tmp_path_factory, installed):
    """Two hosts without Docker, stack `rbproc` (process runtime), up."""
    with _fleet(host_network, s3_server_factory, tmp_path_factory, installed[1], ["rbp1", "rbp2"], "rbproc",
                "process") as f:
        yield f


def restart_dockerd_around_compose_up(h) -> None:
    """One-shot fault on host H: when the rollout recreates its engine (`docker compose ... up --force-recreate`),
    dockerd restarts as `systemctl restart docker` does: stopped (its containers with it) while compose runs,
    then started again; the wrapper removes itself first."""
    h.install("docker", f'case "$*" in *"up -d --force-recreate"*) rm -f "$0"; {docker.STOP_COMMAND}\n'
                        f'/usr/bin/docker "$@"; rc=$?; {docker.start_command(h)}; {docker.WAIT_COMMAND}; exit $rc;;\n'
                        'esac\nexec /usr/bin/docker "$@"')


@pytest.mark.docker
def test_docker_daemon_restarted_during_a_rolling_change_fails_clearly_and_the_next_up_converges(docked):
    f, h = docked.up(), docked.hosts[1]
    f.project.set_deployment(f.stack, f.deployment(max_num_seqs=40))
    restart_dockerd_around_compose_up(h)
    try:
        r = f.project.inferry("up", f.stack, check=False)
    finally:
        struck = not (h.root / "bin" / "docker").exists()
        (h.root / "bin" / "docker").unlink(missing_ok=True)
    out = r.stdout + r.stderr
    assert struck and "Traceback" not in out, out
    if r.returncode != 0:  # the daemon was gone while compose ran: that host failed, named with what and the fix
        assert r.returncode == 1 and f"ssh-{h.name}-service: host {h.name}" in r.stderr, out
        assert "restart the service failed" in r.stderr and f"inferry up {f.stack}" in r.stderr, out
    f.project.inferry("up", f.stack)  # plain: no hand edits on the host or in the state
    for i, x in enumerate(f.hosts):
        assert container(x)["State"]["Running"] and "40" in x.engine_starts()[-1]["argv"], x.name
        assert f.serves(i)
        assert not list(x.path("/etc/inferry").glob("*.inferry-prev")), x.name  # the update finished


@pytest.mark.docker
def test_rebooted_docker_host_serves_again_by_itself_and_status_says_healthy(docked):
    f, h = docked.up(), docked.hosts[0]
    before = container(h)["Id"]
    reboot(h)
    deadline = time.monotonic() + 90  # a bound, not a measurement: the daemon restarts it when it is up
    while not probe.healthy(f.url(0)):
        assert time.monotonic() < deadline, "the engine did not come back after the reboot (Docker's restart policy)"
        time.sleep(0.2)
    assert container(h)["Id"] == before and container(h)["State"]["Running"]  # the same container, restarted
    r = f.project.inferry("status", f.stack)
    assert f"{f.url(0)}  healthy" in r.stdout and f"host {h.name}: engine running since " in r.stdout, r.stdout
    assert f.serves(0)


def test_rebooted_process_host_is_reported_down_with_the_fix_and_the_fix_repairs_it(bare):
    f, h, other = bare.up(), bare.hosts[0], bare.hosts[1]
    others_starts = len(other.engine_starts())
    reboot(h)
    assert not probe.healthy(f.url(0)) and h.exec("pgrep -f supervise.sh").stdout == ""  # nothing restarted it
    r = f.project.inferry("status", f.stack, check=False)
    assert r.returncode == 1 and f"{f.url(0)}  NOT HEALTHY" in r.stdout and "Traceback" not in r.stderr, r.stdout
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith(f"host {h.name}:"))
    assert "engine stopped" in line, r.stdout
    fix = re.search(r"run `(inferry [^`]+)`", line)
    assert fix and fix.group(1) == f"inferry up {f.stack}", line
    f.project.inferry(*fix.group(1).split()[1:])  # exactly the printed command
    assert f.serves(0) and h.exec("pgrep -f supervise.sh").stdout.strip(), "the engine is not serving again"
    assert len(other.engine_starts()) == others_starts  # per host: the other engine was not restarted
    again = f.project.inferry("status", f.stack)
    assert f"host {h.name}: engine running since " in again.stdout and "run `inferry" not in again.stdout
    logins = [x.sshd_log.read_text().count("Accepted publickey") for x in f.hosts]
    f.project.inferry("up", f.stack)  # a no-op with every engine answering: no SSH at all, nothing restarted
    assert [x.sshd_log.read_text().count("Accepted publickey") for x in f.hosts] == logins
    assert len(other.engine_starts()) == others_starts
