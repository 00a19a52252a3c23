"""Rollouts on the real node, watched from outside inferry: the bundled stack's `min_replicas: 2` with no
autoscaler running, an engine option rolled pod by pod while a client polls through the Service and a watch of
the Service's EndpointSlices counts the Ready replicas, and a crashing new revision that stops the rollout while
the previous ReplicaSet keeps serving. The tests run in order on one stack.
"""
from __future__ import annotations

import json
import threading

import pytest

from tests.support.pods import API_KEY, NAME, SECRETS, chat, on_the_node, push, serving_pods, store  # noqa: F401
from tests.support.clusternet import cluster_net
from tests.support.progharness import Poller
from tests.support.realengine import Project
from tests.support.storage_util import make_model

pytestmark = pytest.mark.cluster
NS = "pods-rolling"
STACK = "rolling"


class ReadyWatch(threading.Thread):
    """The Ready endpoints behind the Service at every change, from watches of its EndpointSlices."""

    def __init__(self, cluster):
        super().__init__(daemon=True)
        from kubernetes import client, config

        api = config.new_client_from_config(config_file=str(cluster.kubeconfig), context=cluster.context)
        self.api, self.stop, self.counts = client.DiscoveryV1Api(api), threading.Event(), []

    def run(self) -> None:
        from kubernetes import watch

        ready: dict[str, int] = {}
        while not self.stop.is_set():  # short watches, so that finish() ends this thread
            try:
                for event in watch.Watch().stream(self.api.list_namespaced_endpoint_slice, NS, timeout_seconds=2,
                                                  label_selector=f"kubernetes.io/service-name={NAME}"):
                    s = event["object"]
                    ready[s.metadata.name] = 0 if event["type"] == "DELETED" else sum(
                        1 for e in s.endpoints or [] if e.conditions and e.conditions.ready)
                    self.counts.append(sum(ready.values()))
            except Exception:  # noqa: BLE001  (the API server ended a watch early: watch again)
                continue

    def finish(self) -> list[int]:
        """Stop watching; the Ready counts seen, in order."""
        self.stop.set()
        self.join(10)
        return self.counts


def stack(cluster, store, **model) -> dict:
    """The bundled stack's autoscaling (KEDA, min_replicas 2), its ScaledObject and ServiceMonitor on the node."""
    d = on_the_node(cluster, store, NS, autoscaling={"engine": "keda", "min_replicas": 2, "max_replicas": 6,
                                                     "queue_target": 5}, service_monitor=True)
    d["model"].update(model)
    return d


@pytest.fixture(scope="module")
def rolling(node, cluster, store, tmp_path_factory, installed):
    """The project; destroyed at the end whatever happened."""
    project = Project(tmp_path_factory.mktemp("rolling") / "project", installed[1])
    project.write_stack(STACK, stack(cluster, store), SECRETS)
    yield project
    project.pulumi("destroy", "--yes", "--stack", STACK, check=False, timeout=600)


def up(project, cluster, store, **kw):
    """`inferry up` of the stack, changed as asked; the completed process."""
    engine = kw.pop("engine", {})
    d = stack(cluster, store, **kw)
    d["engine"].update(engine)
    project.write_stack(STACK, d, SECRETS)
    return project.inferry("up", STACK, timeout=600, check=False)


def ready_replicas(cluster) -> tuple[int, int]:
    """(spec.replicas, ready pods) of the Deployment, as the API server has them."""
    dep = cluster.get("deployment", NAME, NS)
    return dep["spec"]["replicas"], dep["status"].get("readyReplicas", 0)


def replicas_owners(cluster) -> set[str]:
    """The field managers whose applies set the Deployment's spec.replicas."""
    dep = json.loads(cluster.kubectl("get", "deployment", NAME, "-n", NS, "-o", "json", "--show-managed-fields").stdout)
    return {m["manager"] for m in dep["metadata"]["managedFields"]
            if "f:replicas" in m.get("fieldsV1", {}).get("f:spec", {})}


def test_min_replicas_is_honoured_with_no_autoscaler_running(rolling, cluster, store):
    r = up(rolling, cluster, store)
    assert r.returncode == 0, r.stdout + r.stderr
    assert cluster.get("scaledobject", NAME, NS)["spec"]["minReplicaCount"] == 2  # made, but nothing acts on it
    assert ready_replicas(cluster) == (2, 2)
    assert not replicas_owners(cluster), "an apply that sets replicas would fight the autoscaler"
    r = up(rolling, cluster, store)  # the next apply has no `replicas`: it must not take the count back to 1
    assert r.returncode == 0 and ready_replicas(cluster) == (2, 2), r.stdout


def test_an_engine_option_rolls_pod_by_pod_while_the_service_always_answers(rolling, node, cluster, store, tmp_path):
    before = {p["metadata"]["name"] for p in serving_pods(cluster, NS)}
    with cluster_net(node, cluster, NS, tmp_path) as net:
        watch, poller = ReadyWatch(cluster), Poller([(net.wait_url(NAME), API_KEY)])
        watch.start()
        poller.start()
        poller.settle()
        r = up(rolling, cluster, store, engine={"max_num_seqs": 96})
        samples, counts = poller.finish(), watch.finish()
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(samples) > 20 and all(s == (True,) for s in samples), samples.count((False,))
    assert counts and min(counts) >= 1 and max(counts) == 2, counts  # min_replicas - maxUnavailable, throughout
    after = serving_pods(cluster, NS)
    assert not before & {p["metadata"]["name"] for p in after} and len(after) == 2
    for p in after:
        args = " ".join(p["spec"]["containers"][0]["args"])
        assert "--max-num-seqs 96" in args, args
    assert ready_replicas(cluster) == (2, 2)


def test_a_crashing_revision_stops_the_rollout_and_the_previous_pods_keep_serving(rolling, node, cluster, store,
                                                                                  tmp_path_factory, tmp_path):
    model = tmp_path_factory.mktemp("crashing") / "m"
    make_model(model, shards=(1 << 20,))
    (model / "config.json").unlink()  # the engine refuses a model folder without it, and exits
    push(store, model, "crashing-model")
    with cluster_net(node, cluster, NS, tmp_path) as net:
        poller = Poller([(net.wait_url(NAME), API_KEY)])
        poller.start()
        poller.settle()
        r = up(rolling, cluster, store, weights="crashing-model", engine={"max_num_seqs": 96})
        samples = poller.finish()
    assert r.returncode == 1 and "container engine: CrashLoopBackOff" in r.stderr, r.stdout + r.stderr
    assert "no config.json in it" in r.stderr and "Traceback" not in r.stdout + r.stderr
    assert all(s == (True,) for s in samples), samples.count((False,))
    status, _ = chat(node, cluster, NS, API_KEY, "200")  # the previous ReplicaSet's pod still serves
    assert status == "200"
    r = up(rolling, cluster, store, engine={"max_num_seqs": 96})  # back to what served: the rollout returns
    assert r.returncode == 0 and ready_replicas(cluster) == (2, 2), r.stdout + r.stderr
    assert all("crashing-model" not in str(p["spec"]) for p in serving_pods(cluster, NS))


def test_adding_the_autoscaler_to_a_fixed_count_keeps_min_replicas(rolling, cluster, store):
    d = stack(cluster, store)
    d["engine"].update(max_num_seqs=96)
    d["target"].update(autoscaling=None, service_monitor=False, replicas=1)
    rolling.write_stack(STACK, d, SECRETS)
    r = rolling.inferry("up", STACK, timeout=600, check=False)
    assert r.returncode == 0 and ready_replicas(cluster) == (1, 1), r.stdout + r.stderr
    assert replicas_owners(cluster)  # the fixed count is the apply's
    # Its next apply drops `replicas`: the API server resets a field nobody owns to 1 (the race Kubernetes'
    # docs warn of), and min_replicas must still be reached with no autoscaler running.
    r = up(rolling, cluster, store, engine={"max_num_seqs": 96})
    assert r.returncode == 0 and ready_replicas(cluster) == (2, 2), r.stdout + r.stderr
    assert not replicas_owners(cluster)
