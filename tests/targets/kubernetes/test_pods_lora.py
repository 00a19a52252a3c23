"""Two LoRA adapters on the real node: a wrong one stops `inferry up` before anything is created; the right ones
are fetched by each pod's init containers beside the model (verified against their manifests), listed by the
engine's /v1/models and each answers a chat; removing one rolls pod by pod while a client in the node's network
chats with the other and sees only 200s. Read from the cluster and the node, not from inferry's reports."""
from __future__ import annotations

import json
import threading

import pytest

from tests.support.pods import API_KEY, MODEL, NAME, SECRETS, on_the_node, push, serving_pods, store  # noqa: F401
from tests.support.realengine import Project

pytestmark = [pytest.mark.cluster, pytest.mark.lora]
NS = "pods-lora"
STACK = "lora"
ADAPTERS = [{"name": "sql", "weights": "adapters/sql-lora", "rank": 16},
            {"name": "chat", "weights": "adapters/chat", "rank": 8}]


@pytest.fixture(scope="module")
def lora(node, cluster, store, tmp_path_factory, installed):
    """Both adapters pushed as a user pushes them; the project, destroyed at the end whatever happened."""
    for a in ADAPTERS:
        folder = tmp_path_factory.mktemp(a["name"])
        (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": a["rank"],
                                                                "base_model_name_or_path": "meta-llama/Llama-3.1-8B"
                                                                "-Instruct"}))
        (folder / "adapter_model.safetensors").write_bytes(a["name"].encode() * 4096)
        with pytest.MonkeyPatch.context() as mp:
            from tests.support.servers.fixtures import ACCESS_KEY, SECRET_KEY

            mp.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
            mp.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
            push(store, folder, a["weights"])
    project = Project(tmp_path_factory.mktemp("lora") / "project", installed[1])
    yield project
    project.pulumi("destroy", "--yes", "--stack", STACK, check=False, timeout=600)


def stack(cluster, store, adapters) -> dict:
    d = on_the_node(cluster, store, NS, replicas=2)
    d["model"]["adapters"] = adapters
    return d


def post(node, cluster, model: str, want: str = "200") -> str:
    """The status of a chat naming MODEL through the engine's Service, from the node's network."""
    ip = cluster.get("service", NAME, NS)["spec"]["clusterIP"]
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
    r = node.http(f"http://{ip}:8000/v1/chat/completions", "-H", "Content-Type: application/json", "-H",
                  f"Authorization: Bearer {API_KEY}", "-d", body, want=want, timeout=30)
    return r.stdout.rsplit("\n", 1)[-1]


def listed(node, cluster) -> list[tuple[str, str | None]]:
    ip = cluster.get("service", NAME, NS)["spec"]["clusterIP"]
    r = node.http(f"http://{ip}:8000/v1/models", "-H", f"Authorization: Bearer {API_KEY}", timeout=30)
    return [(m["id"], m.get("parent")) for m in json.loads(r.stdout.rsplit("\n", 1)[0])["data"]]


def test_a_wrong_adapter_stops_up_before_anything_is_created(lora, cluster, store):
    wrong = [{**ADAPTERS[0], "rank": 32}, {**ADAPTERS[1], "weights": "adapters/none"}]
    lora.write_stack(STACK, stack(cluster, store, wrong), SECRETS)
    r = lora.inferry("up", STACK, check=False)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "model.adapters[0].rank: adapter 'sql' has rank 16 in its adapter_config.json" in r.stderr, r.stderr
    assert "set model.adapters[0].rank: 16" in r.stderr
    assert "adapters/none/adapter_config.json is not in the store" in r.stderr
    assert "Traceback" not in r.stderr
    got = cluster.kubectl("get", "deployments", "-n", NS, "-o", "name", check=False)
    assert got.stdout.strip() == "", got.stdout


def test_both_adapters_are_fetched_and_served_by_every_pod(lora, node, cluster, store):
    lora.write_stack(STACK, stack(cluster, store, ADAPTERS), SECRETS)
    lora.inferry("up", STACK, timeout=600)
    pods = serving_pods(cluster, NS)
    assert len(pods) == 2
    for p in pods:
        inits = [c["name"] for c in p["spec"].get("initContainers", [])]
        # each adapter fetched, then verified against its manifest, beside the model's own two steps
        assert inits == ["fetch-weights", "verify-weights", "fetch-extra-0", "verify-extra-0", "fetch-extra-1",
                         "verify-extra-1"], inits
        for a in ADAPTERS:
            path = f"/models/{a['weights']}/adapter_model.safetensors"
            got = cluster.kubectl("exec", "-n", NS, p["metadata"]["name"], "-c", "engine", "--", "cat", path).stdout
            assert got == a["name"] * 4096
    assert listed(node, cluster) == [(MODEL, None), ("sql", MODEL), ("chat", MODEL)]
    assert [post(node, cluster, m) for m in (MODEL, "sql", "chat")] == ["200"] * 3


def test_removing_an_adapter_rolls_pod_by_pod_with_no_failed_request(lora, node, cluster, store):
    before = {p["metadata"]["name"] for p in serving_pods(cluster, NS)}
    codes: list[str] = []
    stop = threading.Event()
    ip = cluster.get("service", NAME, NS)["spec"]["clusterIP"]
    body = json.dumps({"model": "sql", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})

    def client():
        while not stop.is_set():
            r = node.netns_exec("curl", "-s", "-o", "/dev/null", "-m", "10", "-w", "%{http_code}", "-H",
                                "Content-Type: application/json", "-H", f"Authorization: Bearer {API_KEY}", "-d",
                                body, f"http://{ip}:8000/v1/chat/completions", check=False)
            codes.append(r.stdout)

    t = threading.Thread(target=client)
    t.start()
    try:
        lora.set_deployment(STACK, stack(cluster, store, ADAPTERS[:1]))
        lora.inferry("up", STACK, timeout=600)
    finally:
        stop.set()
        t.join()
    assert len(codes) > 5 and set(codes) == {"200"}, [c for c in codes if c != "200"][:5]
    after = serving_pods(cluster, NS)
    assert len(after) == 2 and not before & {p["metadata"]["name"] for p in after}
    assert listed(node, cluster) == [(MODEL, None), ("sql", MODEL)]
    assert post(node, cluster, "chat", want="404") == "404"
