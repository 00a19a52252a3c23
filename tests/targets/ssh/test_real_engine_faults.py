"""Faults of a real `inferry up` (the real Pulumi CLI and engine, OpenSSH test hosts, an rclone store).

Each fault strikes while an update is under way; the next `inferry up` must converge with no hand edits: no
lock or pending operation left for the user to clear, no process of the interrupted run left behind, nothing
half-written on a host. Every check reads the hosts or Pulumi's state, not inferry's own counters. Each test
brings the stack to the state it needs (`deployed`), so each passes alone.
"""
from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import time

import pytest

from infra.lifecycle import probe
from tests.support.faults import FetchGate, Run, descendants, lock_files, pending, service_files_match
from tests.support.progharness import Poller
from tests.support.realengine import Project, model_store
from tests.support.ssh_env import BUCKET, FILES, MODEL, PREFIX

pytestmark = pytest.mark.faults
API_KEY = "sk-faults-" + "5" * 20
S3_KEYS = ("fa-access-key", "fa-secret-key-" + "6" * 12)
STACK = "faults"


class World:
    """Three hosts (process runtime, rolling), one store, one project with stack `faults`."""

    def __init__(self, hosts, server, project: Project, private_key: str):
        self.hosts, self.server, self.project, self.private_key = hosts, server, project, private_key

    def deployment(self, **engine) -> dict:
        """The stack's deployment, with engine options changed."""
        return {
            "model": {"name": MODEL, "weights": f"s3://{BUCKET}/{PREFIX}"},
            "engine": {"kind": "vllm", "max_model_len": 4096, **engine},
            "target": {"kind": "ssh", "runtime": "process", "health_timeout_s": 60,
                       "private_key": {"config": "sshPrivateKey"},
                       "hosts": [{"address": x.address, "name": x.name, "host_key": x.host_key_line}
                                 for x in self.hosts]},
            "storage": {"endpoint": self.server.endpoint, "region": self.server.region, "bucket": BUCKET,
                        "access_key_id": {"config": "s3AccessKey"}, "secret_access_key": {"config": "s3SecretKey"}},
            "provider": {"name": "test-cloud", "region": "eu-test", "gpu": "H200", "price_per_gpu_hour": 3.0},
            "serving": {"port": 8000, "api_key": {"config": "apiKey"}},
        }

    def replica(self, i: int) -> str:
        """The i-th host's engine URL."""
        return f"http://{self.hosts[i].address}:8000"

    def start(self, *args: str) -> Run:
        """`inferry ARGS` started as a terminal starts it: the leader of its own process group."""
        return Run(self.project, args)

    def converges(self) -> subprocess.CompletedProcess:
        """The next `inferry up` succeeds alone, leaves no lock or pending operation, every engine serves and
        every service file on every host is the one Pulumi's state says the apply wrote."""
        r = self.project.inferry("up", STACK)
        assert "Traceback" not in r.stdout + r.stderr
        assert pending(self.project, STACK) == [] and lock_files(self.project) == []
        state = self.project.resources(STACK)
        for i, h in enumerate(self.hosts):
            assert probe.healthy(self.replica(i) + "/v1")
            assert service_files_match(h, state[f"ssh-{h.name}-service"]["outputs"]) == []
        return r


@pytest.fixture(scope="module")
def world(host_network, s3_server_factory, tmp_path_factory, installed):
    tmp = tmp_path_factory.mktemp("faults")
    server = model_store(s3_server_factory, host_network, S3_KEYS, tmp)
    hosts = host_network.add_hosts(["fa1", "fa2", "fa3"])
    w = World(hosts, server, Project(tmp / "project", installed[1]), host_network.client_key_text)
    w.project.write_stack(STACK, w.deployment(), {"sshPrivateKey": w.private_key, "apiKey": API_KEY,
                                                  "s3AccessKey": S3_KEYS[0], "s3SecretKey": S3_KEYS[1]})
    yield w
    w.project.pulumi("destroy", "--yes", "--stack", STACK, check=False)
    for h in hosts:
        host_network.remove_host(h)


@pytest.fixture
def deployed(world):
    """The stack up and converged, every engine starting fast again: a test before may have slowed them, or
    failed half-way and left some hosts undeployed (so an `up`, a no-op when nothing differs)."""
    for h in world.hosts:
        h.set_standin()
    world.project.inferry("up", STACK)
    return world


def interrupt_while_an_engine_starts(w: World, seqs: int, sig: int, group: bool) -> tuple[Run, set[int]]:
    """Start a rolling change whose engines take 8 s to start; once a host's new engine is starting, send SIG
    to inferry (or its whole process group); returns the run and the processes it had started."""
    for h in w.hosts:
        h.set_standin(startup_s=8)
    w.project.set_deployment(STACK, w.deployment(**({"max_num_seqs": seqs} if seqs else {})))
    starts = [len(h.engine_starts()) for h in w.hosts]
    run = w.start("up", STACK)
    deadline = time.monotonic() + 120
    while not any(len(h.engine_starts()) > n for h, n in zip(w.hosts, starts)):
        assert run.proc.poll() is None and time.monotonic() < deadline, run.output()
        time.sleep(0.1)
    children = descendants(run.proc.pid)
    assert any("pulumi" in c for c in children.values()), children
    (os.killpg if group else os.kill)(run.proc.pid, sig)
    return run, set(children)


def gone(pids: set[int], timeout: float = 60) -> list[int]:
    """The pids still alive after waiting up to TIMEOUT for them to end."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in pids if os.path.exists(f"/proc/{p}") and "Z" not in _state(p)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def _state(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


@pytest.mark.usefixtures("deployed")
def test_ctrl_c_stops_the_update_cleanly_and_the_next_up_converges(world):
    run, pids = interrupt_while_an_engine_starts(world, 48, signal.SIGINT, group=False)
    code = run.wait(120)
    out = run.output()
    assert code == 130, out
    assert "interrupted" in out and f"inferry up {STACK}" in out and "Traceback" not in out, out
    assert gone(pids) == [], "a process of the interrupted run is still running"
    assert lock_files(world.project) == []  # pulumi ended its update itself: its lock is released
    world.converges()
    assert all("48" in h.engine_starts()[-1]["argv"] for h in world.hosts)


@pytest.mark.usefixtures("deployed")
def test_sigkill_of_the_process_group_leaves_nothing_the_next_up_cannot_fix(world):
    run, pids = interrupt_while_an_engine_starts(world, 40, signal.SIGKILL, group=True)
    assert run.wait(30) == -signal.SIGKILL
    assert gone(pids) == [], "a process of the killed run is still running"
    assert lock_files(world.project) != []  # what a killed pulumi leaves: its lock, held by no process
    for h in world.hosts:
        h.set_standin()
    r = world.converges()
    assert "removed the lock" in r.stdout + r.stderr, r.stdout + r.stderr
    assert all("40" in h.engine_starts()[-1]["argv"] for h in world.hosts)


def test_sigkill_during_a_first_up_leaves_no_pending_create(world):
    world.project.pulumi("destroy", "--yes", "--stack", STACK)
    world.project.set_deployment(STACK, world.deployment())
    run, pids = interrupt_while_an_engine_starts(world, 0, signal.SIGKILL, group=True)
    assert run.wait(30) == -signal.SIGKILL and gone(pids) == []
    assert any(op["type"] == "creating" for op in pending(world.project, STACK))  # what Pulumi keeps for ever
    for h in world.hosts:
        h.set_standin()
    r = world.converges()  # pending() == []: the interrupted creates were run again and cleared
    assert "cleared" in r.stdout and "interrupted create" in r.stdout, r.stdout


def complete(h, model_dir: str) -> list[str]:
    """The files in place in the host's model folder (no download's .part file)."""
    d = h.path(model_dir)
    return sorted(p.name for p in d.iterdir() if ".part." not in p.name) if d.is_dir() else []


@pytest.mark.usefixtures("deployed")
def test_store_stopping_mid_fetch_names_the_file_and_the_next_up_resumes(world):
    h = world.hosts[0]
    model_dir = world.project.resources(STACK)[f"ssh-{h.name}-weights"]["outputs"]["model_dir"]
    world.project.pulumi("destroy", "--yes", "--stack", STACK)
    h.exec(f"rm -rf {model_dir}", check=True)  # destroy keeps the cache: this host fetches anew
    gate = FetchGate(h, passes=2)
    try:
        run = world.start("up", STACK)
        deadline = time.monotonic() + 120
        # The fetch runs its downloads in parallel: the store stops once the two let through are in place.
        while not (gate.waiting() and len(complete(h, model_dir)) == 2):
            assert run.proc.poll() is None and time.monotonic() < deadline, run.output()
            time.sleep(0.05)
        world.server.stop()
        gate.release()
        assert run.wait(300) == 1
        out = run.output()
        before = gate.fetched()
        world.server.start()
        kept = complete(h, model_dir)
        assert len(kept) == 2 and not any(".part." in p.name for p in h.path(model_dir).iterdir()), kept
        lost = sorted(set(FILES) - set(kept))
        assert f"host {h.name}" in out and all(f"download failed: {f}" in out for f in lost), out
        assert f"inferry up {STACK}" in out and "Traceback" not in out and "X-Amz-Signature" not in out, out
        world.converges()
        assert sorted(gate.fetched()[len(before):]) == lost  # resumed: only what was missing is fetched
    finally:
        gate.remove()
        world.server.start()
    for rel, data in FILES.items():
        assert hashlib.sha256(h.path(f"{model_dir}/{rel}").read_bytes()).digest() == hashlib.sha256(data).digest()


@pytest.mark.usefixtures("deployed")
def test_host_lost_in_its_turn_of_a_rolling_update_fails_alone(world):
    lost = world.hosts[1]
    others = [i for i, h in enumerate(world.hosts) if h is not lost]
    for h in world.hosts:
        h.set_standin(startup_s=1)
    world.project.set_deployment(STACK, world.deployment(max_num_seqs=56))
    lost.kill_sshd_on("setsid")  # the restart of its engine, in its turn: every sshd of the host dies
    for i in others:  # the others read their state late: the lost host takes the first turn, theirs come after
        world.hosts[i].install("sha256sum", 'sleep 2; exec /usr/bin/sha256sum "$@"')
    poller = Poller([(world.replica(i), API_KEY) for i in others])
    poller.start()
    try:
        r = world.project.inferry("up", STACK, check=False)
        samples = poller.finish()
        assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
        failed = set(re.findall(r"ssh-(\w+)-service: host", r.stderr))
        assert failed == {lost.name}, r.stderr  # only that host: the rollout went on without it
        assert f"host {lost.name}" in r.stderr and f"inferry up {STACK}" in r.stderr, r.stderr
        assert all(any(s) for s in samples), "the hosts still reachable stopped serving at once"
        assert all("56" in world.hosts[i].engine_starts()[-1]["argv"] for i in others)
    finally:
        lost.start_sshd()
        lost.unwrap("setsid")
        for i in others:
            (world.hosts[i].root / "bin" / "sha256sum").unlink(missing_ok=True)
    for h in world.hosts:
        h.set_standin()
    world.converges()
    assert "56" in lost.engine_starts()[-1]["argv"]
