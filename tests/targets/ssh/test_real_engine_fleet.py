"""A fleet larger than Pulumi's provider host pool (four threads) and than the CLI's default parallelism (four
operations per CPU: eight on a 2-core machine) comes up in one engine start, not in waves.

Real: the Pulumi CLI and engine, its Python provider host, ten OpenSSH hosts, an rclone S3 store. Stand-in: the
GPU engine, which takes a few seconds to load. Witnessed on the hosts' side (tests/support/ssh_barrier.py): each
host's first health check waits for every other host's, so it passes only if all ten engines were being
waited on at once; with four threads serving the calls, or eight operations at once, the others could not
arrive until the first had given up.
"""
from __future__ import annotations

import re

import pytest

from infra.lifecycle import probe
from tests.support.progharness import Poller
from tests.support.realengine import Project, model_store, ssh_stack
from tests.support.ssh_barrier import HealthBarrier
from tests.support.ssh_env import MODEL

API_KEY = "sk-fleet-" + "4" * 24
S3_KEYS = ("fleet-access-key", "fleet-secret-" + "8" * 16)
HOSTS = 10


@pytest.fixture(scope="module")
def fleet(host_network, s3_server_factory, tmp_path_factory, installed):
    tmp = tmp_path_factory.mktemp("fleet")
    server = model_store(s3_server_factory, host_network, S3_KEYS, tmp)
    hosts = host_network.add_hosts([f"fl{i}" for i in range(HOSTS)])
    for h in hosts:
        h.set_standin(startup_s=3)  # a load phase: each create holds its provider call through it
    project = Project(tmp / "project", installed[1])
    project.write_stack("fleet", ssh_stack(hosts, server, health_timeout_s=60), {
        "sshPrivateKey": host_network.client_key_text, "apiKey": API_KEY, "s3AccessKey": S3_KEYS[0],
        "s3SecretKey": S3_KEYS[1]})
    yield project, hosts, server
    project.pulumi("destroy", "--yes", "--stack", "fleet", check=False)
    for h in hosts:
        host_network.remove_host(h)


def test_first_up_waits_on_every_engine_at_once(fleet):
    project, hosts, _ = fleet
    with HealthBarrier(hosts) as barrier:
        r = project.inferry("up", "fleet")
        assert barrier.all_at_once(), barrier.spans()
    assert len(re.findall(r"created \S+ ssh-\S+-service$", r.stdout, re.M)) == HOSTS, r.stdout
    assert all(probe.chat_check(f"http://{h.address}:8000/v1", API_KEY, MODEL) for h in hosts)
    again = project.inferry("up", "fleet")  # the pool's size and max_parallel are no input of any step
    assert re.search(r"done in \S+: \d+ unchanged$", again.stdout, re.M), again.stdout


def test_a_batch_rollout_keeps_all_but_one_batch_serving(fleet):
    """`max_unavailable: 30%` of ten hosts: engines restart three at a time, the next three only once those
    answer; a client polling every replica through the whole `inferry up` never finds fewer than seven."""
    project, hosts, server = fleet
    if not project.resources("fleet"):  # run alone
        project.inferry("up", "fleet")
    before = [len(h.engine_starts()) for h in hosts]
    d = ssh_stack(hosts, server, health_timeout_s=60, max_unavailable="30%")
    d["engine"]["max_num_seqs"] = 40
    project.set_deployment("fleet", d)
    poller = Poller([(f"http://{h.address}:8000", API_KEY) for h in hosts])
    poller.start()
    poller.settle()
    project.inferry("up", "fleet")
    samples = poller.finish()
    starts = sorted(s["time"] for h, n in zip(hosts, before) for s in h.engine_starts()[n:])
    assert len(starts) == HOSTS, starts  # every engine restarted once, with the new option
    for h in hosts:
        argv = h.engine_starts()[-1]["argv"]
        assert argv[argv.index("--max-num-seqs") + 1] == "40", argv
    # each engine takes 3 s to answer: the first three started together (one at a time would take 3 s each),
    # and a fourth start within 3 s of a batch's first would be a wider batch
    assert starts[2] < starts[0] + 3 and all(starts[i + 3] > starts[i] + 3 for i in range(HOSTS - 3)), starts
    assert len(samples) > 10 and min(sum(s) for s in samples) >= HOSTS - 3, [sum(s) for s in samples]
