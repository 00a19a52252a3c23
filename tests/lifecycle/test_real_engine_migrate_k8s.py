"""`inferry migrate` between a Kubernetes stack on the real node and an SSH stack, there and back, with a client
polling both the whole time: the weights copied between the two stores, each target brought up and checked,
each source drained (its engine's own queue metrics read through its endpoint) and destroyed only then.

The Kubernetes stack's endpoint is its Service's cluster DNS name, as for a user without an Ingress: the
migrations run as from a machine on the cluster's network, the name answered by CoreDNS from the API server
(tests/support/clusternet.py).
"""
from __future__ import annotations

import pytest

from infra.lifecycle import probe
from tests.support.clusternet import ClusterNet, cluster_net
from tests.support.progharness import Poller
from tests.support.pods import NAME, on_the_node, serving_pods, store  # noqa: F401
from tests.support.realengine import Project, model_store, ssh_stack
from tests.support.servers.fixtures import ACCESS_KEY, SECRET_KEY
from tests.support.ssh_env import MODEL, PREFIX

pytestmark = pytest.mark.cluster
NS = "mig-k8s"
SSH_KEYS = ("mk-ssh-access", "mk-ssh-secret-" + "4" * 12)
API = {"k8s": "sk-mk-k8s-" + "1" * 16, "ssh": "sk-mk-ssh-" + "2" * 16}
ENGINE = {"kind": "vllm", "max_model_len": 4096}  # the same on both sides: migrate moves, it does not change


@pytest.fixture(scope="module")
def world(node, cluster, store, host_network, s3_server_factory, tmp_path_factory, installed):  # noqa: F811
    """Stacks k8s (the real node, the pods' store holding the model) and ssh (one test host, its own empty
    store and keys) in one project; both destroyed at the end whatever happened."""
    tmp = tmp_path_factory.mktemp("migrate-k8s")
    project, host = Project(tmp / "project", installed[1]), host_network.add_host("mk1")
    ssh_store = model_store(s3_server_factory, host_network, SSH_KEYS, tmp, with_model=False)
    k8s = on_the_node(cluster, store, NS)
    k8s["engine"] = ENGINE
    project.write_stack("k8s", k8s, {"apiKey": API["k8s"], "s3AccessKey": ACCESS_KEY, "s3SecretKey": SECRET_KEY})
    ssh = ssh_stack([host], ssh_store, provider="eu-gpu-cloud")
    ssh["engine"], ssh["model"]["weights"] = ENGINE, PREFIX  # both stacks name the prefix; each its own bucket
    project.write_stack("ssh", ssh, {"sshPrivateKey": host_network.client_key_text, "apiKey": API["ssh"],
                                     "s3AccessKey": SSH_KEYS[0], "s3SecretKey": SSH_KEYS[1]})
    with cluster_net(node, cluster, NS, tmp) as net:
        yield project, net, f"http://{host.address}:8000", ssh_store
    for name in ("ssh", "k8s"):
        project.pulumi("destroy", "--yes", "--stack", name, check=False, timeout=600)
    host_network.remove_host(host)


def migrate(project: Project, net: ClusterNet, a: str, b: str) -> str:
    """`inferry migrate --from a --to b --destroy-source` as from the cluster's network; its output."""
    argv = [*project.inferry_argv(), "migrate", "--from", a, "--to", b, "--destroy-source", "--drain-grace", "1",
            "--yes"]
    return project.run(net.argv(argv), timeout=900).stdout


def test_kubernetes_to_ssh_and_back_with_no_moment_without_an_answer(world, cluster, node):
    project, net, ssh_url, ssh_store = world
    project.inferry("up", "k8s")
    k8s_url = f"http://{net.name(NAME)}:8000"
    assert net.resolve(net.name(NAME)) == net.wait_ip(NAME)  # cluster DNS answers
    # The Service's address is looked up at each sample: it changes when the Kubernetes stack comes back.
    polls = Poller([(lambda: net.url(NAME), API["k8s"]), (ssh_url, API["ssh"])])
    polls.start()
    polls.settle()
    there = migrate(project, net, "k8s", "ssh")
    back = migrate(project, net, "ssh", "k8s")
    samples = polls.finish()
    assert f"cutover done: k8s is destroyed; clients must use {ssh_url}/v1" in there, there
    assert f"cutover done: ssh is destroyed; clients must use {k8s_url}/v1" in back, back
    for out, name in ((there, "k8s"), (back, "ssh")):  # drained on the engine's own metrics, not a blind wait
        assert f"{name} idle for 1s" in out and "metrics unreadable" not in out, out
    phases = [s for i, s in enumerate(samples) if i == 0 or s != samples[i - 1]]
    assert all(any(s) for s in samples), f"a moment with no endpoint answering: {phases}"
    assert phases[0] == (True, False) and phases[-1] == (True, False) and (False, True) in phases, phases
    manifest = ssh_store.root / "inferry-weights" / PREFIX / "inferry-manifest.json"
    assert manifest.exists()  # the copy there: the ssh stack's store had nothing before
    assert project.resources("ssh") == {} and not probe.healthy(ssh_url + "/v1")
    assert net.resolve(net.name(NAME)) == net.wait_ip(NAME)  # the new Service's IP
    (pod,) = serving_pods(cluster, NS)
    assert pod["spec"]["nodeName"] == node.name and probe.chat_check(net.url(NAME) + "/v1", API["k8s"], MODEL)
