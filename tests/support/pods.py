"""The bundled Kubernetes stack on the real node (tests/support/node.py), its weights in a real S3 server the
pods reach, and a client of its Service: what the tests of pods that really run share."""
from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.sizing.test_sizing_modelinfo import LLAMA_CONFIG
from tests.support.kubernetes_stacks import raw_deployment
from tests.support.node import LABEL, TAINT
from tests.support.servers.fixtures import ACCESS_KEY, SECRET_KEY
from tests.support.storage_util import make_model

API_KEY = "sk-pods-4f8a2c9e7b1d5063a8e2f4c6b9d1e7a3"  # random enough for the gateway
NAME = "inferry-llama-3-1-8b-instruct"
MODEL = "llama-3.1-8b-instruct"
SECRETS = {"apiKey": API_KEY, "s3AccessKey": ACCESS_KEY, "s3SecretKey": SECRET_KEY}


def on_the_node(cluster, store, namespace: str, **target) -> dict:
    """The bundled Kubernetes stack, sized for the test node and pinned to it, with its weights in `store`;
    one replica, no autoscaler and no gateway unless `target` says otherwise."""
    d = raw_deployment()
    d["target"].pop("gateway", None)  # the tests of the gateway ask for it (tests/targets/kubernetes/test_pods_gateway.py)
    d["target"].update({"kubeconfig": str(cluster.kubeconfig), "context": cluster.context, "namespace": namespace,
                        "replicas": 1, "autoscaling": None, "service_monitor": False, "cpu": "100m",
                        "memory": "1Gi", "cache_size": "1Gi", "startup_timeout_s": 120,
                        "node_selector": {LABEL: "true"},
                        "tolerations": d["target"]["tolerations"] + [{**TAINT, "operator": "Equal"}], **target})
    d["storage"].update(endpoint=store.endpoint)
    d.pop("policy")  # the test store's region is not in the EU
    return d


def push(store, folder, prefix: str) -> None:
    """`inferry weights push` of a model folder into the store's bucket, as a user runs it."""
    from typer.testing import CliRunner

    from cli.main import app

    r = CliRunner().invoke(app, ["weights", "push", str(folder), "-p", prefix, "--endpoint", store.endpoint,
                                 "--bucket", "inferry-weights"])
    assert r.exit_code == 0, r.output


@pytest.fixture(scope="module")
def store(node, s3_server_factory, tmp_path_factory) -> Iterator:
    """A real S3 server where the node's pods reach it (this machine's end of the node's veth), with a model."""
    server = s3_server_factory(host=node.lay.gateway)
    server.bucket("inferry-weights")
    model = tmp_path_factory.mktemp("model") / "m"
    make_model(model, shards=(3 << 20, 1 << 20))
    (model / "config.json").write_text(json.dumps(LLAMA_CONFIG))
    with pytest.MonkeyPatch.context() as mp:  # `weights push` reads the keys as a user's shell has them
        mp.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        mp.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        push(server, model, MODEL)
        yield server


def serving_pods(cluster, namespace: str) -> list[dict]:
    """The engine's pods that are not being deleted (not the gateway's)."""
    return [p for p in cluster.get("pods", namespace=namespace)["items"] if not p["metadata"].get("deletionTimestamp")
            and p["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "engine"]


def pod_of(cluster, namespace: str) -> dict:
    """The one serving pod."""
    (pod,) = serving_pods(cluster, namespace)
    return pod


def chat(node, cluster, namespace: str, key: str | None, want: str) -> tuple[str, str]:
    """(status, body) of a chat completion through the Service, sent from inside the node's network."""
    ip = cluster.get("service", NAME, namespace)["spec"]["clusterIP"]
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
    auth = ["-H", f"Authorization: Bearer {key}"] if key else []
    r = node.http(f"http://{ip}:8000/v1/chat/completions", "-H", "Content-Type: application/json", *auth,
                  "-d", body, want=want)
    text, _, status = r.stdout.rpartition("\n")
    return status, text
