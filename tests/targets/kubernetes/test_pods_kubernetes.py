"""The Kubernetes target down to the pod: `inferry up` (real Pulumi engine and pulumi-kubernetes provider) onto the
real node (tests/support/node.py). The fetch init container really copies the weights from a real S3 server with
the aws CLI, the verify init container checks them, the engine container (the stand-in engine, the only
stand-in besides the node's nvidia.com/gpu capacity) passes the rendered probes, and chat completions answer
through the Service as a client inside the cluster's network sees it. The tests of one stack run in order.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.pods import API_KEY, MODEL, NAME, SECRETS, chat, on_the_node, pod_of, push, store  # noqa: F401
from tests.support.realengine import Project
from tests.support.storage_util import make_model

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def vllm(node, cluster, store, tmp_path_factory, installed):
    """The vLLM stack's project; destroyed at the end whatever happened."""
    project = Project(tmp_path_factory.mktemp("pods") / "project", installed[1])
    project.write_stack("pods", on_the_node(cluster, store, "pods-vllm"), SECRETS)
    yield project
    project.pulumi("destroy", "--yes", "--stack", "pods", check=False, timeout=600)


def test_up_fetches_the_weights_in_the_pod_and_the_engine_passes_its_probes(vllm, node, cluster):
    r = vllm.inferry("up", "pods", timeout=600)
    assert "kubernetes:apps/v1:Deployment" in r.stdout, r.stdout
    pod = pod_of(cluster, "pods-vllm")
    assert pod["spec"]["nodeName"] == node.name
    inits = {s["name"]: s["state"].get("terminated", {}) for s in pod["status"]["initContainerStatuses"]}
    assert {n: t.get("reason") for n, t in inits.items()} == {"fetch-weights": "Completed", "verify-weights": "Completed"}
    fetched = cluster.kubectl("logs", "-n", "pods-vllm", pod["metadata"]["name"], "-c", "fetch-weights").stdout
    assert "weights: fetched s3://inferry-weights/llama-3.1-8b-instruct" in fetched, fetched
    (engine,) = [s for s in pod["status"]["containerStatuses"] if s["name"] == "engine"]
    assert engine["ready"] and engine["restartCount"] == 0
    spec = [c for c in pod["spec"]["containers"] if c["name"] == "engine"][0]
    assert spec["readinessProbe"]["httpGet"]["path"] == "/health" and "livenessProbe" in spec
    assert spec["resources"]["requests"]["nvidia.com/gpu"] == "1"


def test_the_pod_runs_confined_and_its_namespace_refuses_a_privileged_pod(vllm, node, cluster):
    pod = pod_of(cluster, "pods-vllm")
    assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for c in pod["spec"]["initContainers"] + pod["spec"]["containers"]:
        assert c["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}, c["name"]
    # The kernel's view of the running engine: no effective capability, no new privileges, seccomp filtering.
    status = cluster.kubectl("exec", "-n", "pods-vllm", pod["metadata"]["name"], "-c", "engine", "--",
                             "cat", "/proc/1/status").stdout
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    assert int(fields["CapEff"], 16) == 0 and fields["NoNewPrivs"].strip() == "1" and fields["Seccomp"].strip() == "2"
    labels = cluster.get("namespace", "pods-vllm")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    privileged = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "privileged", "namespace": "pods-vllm"},
                  "spec": {"containers": [{"name": "c", "image": "x", "securityContext": {"privileged": True}}]}}
    refused = cluster.apply(privileged)
    assert refused.returncode != 0 and "violates PodSecurity" in refused.stderr, refused.stderr


def test_chat_completions_answer_through_the_service_with_the_key_and_401_without(vllm, node, cluster):
    status, body = chat(node, cluster, "pods-vllm", API_KEY, "200")
    assert status == "200" and json.loads(body)["choices"][0]["message"]["content"], body
    status, _ = chat(node, cluster, "pods-vllm", None, "401")
    assert status == "401"
    status, _ = chat(node, cluster, "pods-vllm", "sk-wrong", "401")
    assert status == "401"


@pytest.mark.privacy
def test_the_record_reads_the_pod_back_and_check_names_a_node_outside_the_eu(vllm, node, cluster, store):
    """`inferry record` on the real node: the pod, its node's region label and GPUs, the running engine's
    telemetry switches (compared with the process's own /proc/1/environ); a node relabelled outside the EU is
    named by --check."""
    region = "topology.kubernetes.io/region"
    if not vllm.resources("pods"):  # run alone: bring it up as the first test does
        vllm.inferry("up", "pods", timeout=600)
    d = on_the_node(cluster, store, "pods-vllm")
    d["policy"] = {"residency": "eu", "allowed_regions": [store.region, "eu-test"]}
    vllm.set_deployment("pods", d)  # the policy is not rendered: nothing to apply
    cluster.kubectl("label", "node", node.name, f"{region}=eu-test", "--overwrite")
    try:
        r = vllm.inferry("record", "pods", "--json", "--check")
        rec = json.loads(r.stdout)
        pod = pod_of(cluster, "pods-vllm")
        (rep,) = rec["replicas"]
        assert rep["source"] == f"pod {pod['metadata']['name']}" and rep["error"] is None, rep
        assert rep["place"] == {"node": node.name, "region": "eu-test"}, rep
        gpus = cluster.get("node", node.name)["status"]["allocatable"].get("nvidia.com/gpu", "0")
        assert len(rep["gpus"]) == int(gpus) > 0, rep
        environ = cluster.kubectl("exec", "-n", "pods-vllm", pod["metadata"]["name"], "-c", "engine", "--",
                                  "cat", "/proc/1/environ").stdout
        running = dict(e.split("=", 1) for e in environ.split("\0") if "=" in e)
        assert rep["env"] == {k: running[k] for k in rec["telemetry_off"]} == rec["telemetry_off"], rep
        cmdline = cluster.kubectl("exec", "-n", "pods-vllm", pod["metadata"]["name"], "-c", "engine", "--",
                                  "cat", "/proc/1/cmdline").stdout.split("\0")
        argv_flags = list(dict.fromkeys(a.split("=", 1)[0] for a in cmdline if a.startswith("--")))
        assert [f for f in rep["flags"] if f.startswith("--")] == argv_flags and argv_flags, (rep, cmdline)
        assert API_KEY not in r.stdout
        cluster.kubectl("label", "node", node.name, f"{region}=ap-northeast-1", "--overwrite")  # Tokyo: not the store's region
        r = vllm.inferry("record", "pods", "--check", check=False)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert f"pod {pod['metadata']['name']}: runs on a node outside the EU" in r.stderr, r.stderr
        assert "'ap-northeast-1'" in r.stderr
    finally:
        cluster.kubectl("label", "node", node.name, f"{region}-", check=False)


def test_destroy_removes_what_inferry_made_and_the_node_runs_nothing_of_it(vllm, node, cluster):
    vllm.inferry("destroy", "pods", "--yes", timeout=600)
    gone = cluster.kubectl("get", "namespace", "pods-vllm", check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr
    left = cluster.kubectl("get", "pods", "-A", "--field-selector", f"spec.nodeName={node.name}", "-o", "name").stdout
    assert left.strip() == ""


@pytest.fixture(scope="module")
def trtllm(node, cluster, store, tmp_path_factory, installed):
    """The same stack with TensorRT-LLM (PyTorch backend: no engine build), behind the nginx auth proxy."""
    project = Project(tmp_path_factory.mktemp("pods-trt") / "project", installed[1])
    d = on_the_node(cluster, store, "pods-trtllm")
    d["engine"] = {"kind": "tensorrt-llm", "max_model_len": 32768}
    project.write_stack("trt", d, SECRETS)
    yield project
    project.pulumi("destroy", "--yes", "--stack", "trt", check=False, timeout=600)


def test_tensorrt_llm_serves_behind_its_auth_proxy_sidecar(trtllm, node, cluster):
    trtllm.inferry("up", "trt", timeout=600)
    pod = pod_of(cluster, "pods-trtllm")
    assert {s["name"]: s["ready"] for s in pod["status"]["containerStatuses"]} == {"engine": True, "auth-proxy": True}
    status, body = chat(node, cluster, "pods-trtllm", API_KEY, "200")
    assert status == "200" and json.loads(body)["choices"], body
    status, body = chat(node, cluster, "pods-trtllm", "sk-wrong", "401")
    assert status == "401" and "missing or wrong API key" in body
    trtllm.inferry("destroy", "trt", "--yes", timeout=600)
    assert cluster.kubectl("get", "namespace", "pods-trtllm", check=False).returncode != 0


def failing_up(cluster, store, folder: Path, bin_dir: Path, namespace: str, change) -> tuple[Project, str]:
    """`inferry up` of a stack that cannot roll out: (project, stderr); exit 1, no traceback."""
    project = Project(folder / namespace, bin_dir)
    d = on_the_node(cluster, store, namespace)
    change(d)
    project.write_stack("bad", d, SECRETS)
    r = project.inferry("up", "bad", check=False, timeout=600)
    assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    return project, r.stderr


def test_an_image_the_node_does_not_have_fails_fast_naming_the_image_and_the_fix(node, cluster, store, tmp_path,
                                                                                   installed):
    image = "vllm/vllm-openai:v0.0.0-not-on-the-node"
    project, err = failing_up(cluster, store, tmp_path, installed[1], "pods-pull",
                              lambda d: d["engine"].update(image=image))
    try:
        # the verify init container runs in the engine image: it is the first to need it
        assert re.search(r"did not roll out: pod \S+, container verify-weights: (ErrImagePull|ImagePullBackOff)", err), err
        assert image in err and "engine.image" in err, err
        assert "not available after" not in err, err  # the reason, not the stack's startup timeout (120 s)
    finally:
        project.inferry("destroy", "bad", "--yes", timeout=600)


def test_an_engine_that_exits_at_start_is_reported_with_its_last_log_lines(node, cluster, store, tmp_path,
                                                                            installed):
    model = tmp_path / "m"
    make_model(model, shards=(1 << 20,))
    (model / "config.json").unlink()  # the engine refuses a model folder without it, and exits
    push(store, model, "broken-model")
    project, err = failing_up(cluster, store, tmp_path, installed[1], "pods-crash",
                              lambda d: d["model"].update(weights="broken-model"))
    try:
        assert "container engine: CrashLoopBackOff" in err, err
        assert "its last log lines:" in err and "no config.json in it" in err, err
    finally:
        project.inferry("destroy", "bad", "--yes", timeout=600)
