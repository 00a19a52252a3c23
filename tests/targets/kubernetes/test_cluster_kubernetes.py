"""The Kubernetes target against a real API server (Kubernetes 1.36, tests/support/cluster.py), deployed by the real
Pulumi engine and the real pulumi-kubernetes provider. Pods run no containers (kwok's fake nodes mark them
Running): serving is not proven here, everything up to it is. The tests of the stack are its life in order, and
each also runs alone: `deployed` brings the stack up first when nothing is.
"""
from __future__ import annotations

import base64
import json
import re

import pytest
import yaml

from tests.support.kubernetes_stacks import CASES, K8S_STACK, _merge, raw_deployment
from tests.support.realengine import Project
from tests.support.servers.fixtures import ACCESS_KEY, SECRET_KEY

API_KEY = "sk-cluster-" + "6" * 20
NS, NAME = "inferry", "inferry-llama-3-1-8b-instruct"


def manifests(case: str) -> list[dict]:
    """What `inferry render --out` writes for a variant of the bundled Kubernetes stack, as objects."""
    from infra.stack.stackfile import parse_deployment
    from infra.targets.kubernetes.manifests import render
    from tests.support.kubernetes_stacks import spec_of

    d = parse_deployment(_merge(raw_deployment(), CASES[case]), case)
    return [yaml.safe_load(text) for text in render(d, spec_of(d), "s").values()]


@pytest.mark.parametrize("case", list(CASES))
def test_rendered_manifests_pass_the_api_servers_own_validation(cluster, case):
    objects = manifests(case)
    namespaces = {o["metadata"].get("namespace") for o in objects} - {None}
    for ns in namespaces:  # a server-side dry run of namespaced objects needs their namespace to exist
        cluster.kubectl("create", "namespace", ns, check=False)
    r = cluster.apply(*objects, extra=("--server-side", "--dry-run=server", "--validate=strict"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("(server dry run)") == len(objects), r.stdout


def test_bundled_stack_renders_and_passes_too(cluster, cli, tmp_path):
    r = cli("render", str(K8S_STACK), "--out", str(tmp_path / "out"))
    assert r.exit_code == 0, r.output
    objects = [yaml.safe_load(p.read_text()) for p in sorted((tmp_path / "out").rglob("*.yaml"))]
    kinds = {o["kind"] for o in objects}
    assert {"Deployment", "Service", "ScaledObject"} <= kinds
    r = cluster.apply(*objects, extra=("--server-side", "--dry-run=server", "--validate=strict"))
    assert r.returncode == 0, r.stderr


def stack_deployment(cluster, store, **target) -> dict:
    """The bundled Kubernetes stack, pointed at this cluster and store; the engine pods serve with no gateway in
    front (the gateway on a cluster: tests/targets/kubernetes/test_pods_gateway.py)."""
    d = raw_deployment()
    d["target"].pop("gateway", None)
    d["target"].update(kubeconfig=str(cluster.kubeconfig), context=cluster.context, **target)
    d["storage"].update(endpoint=store.endpoint)
    d.pop("policy")  # the test store's region is not in the EU
    return d


@pytest.fixture(scope="module")
def k8s(cluster, s3_server, tmp_path_factory, installed):
    (s3_server.root / "inferry-weights").mkdir(parents=True, exist_ok=True)
    project = Project(tmp_path_factory.mktemp("cluster") / "project", installed[1])
    project.write_stack("k8s", stack_deployment(cluster, s3_server),
                        {"apiKey": API_KEY, "s3AccessKey": ACCESS_KEY, "s3SecretKey": SECRET_KEY})
    yield project, cluster, s3_server
    project.pulumi("destroy", "--yes", "--stack", "k8s", check=False, timeout=600)


@pytest.fixture
def deployed(k8s):
    """The stack up as its stack file says, as the tests before leave it: `inferry up` when nothing is."""
    project = k8s[0]
    if not project.resources("k8s"):
        project.inferry("up", "k8s", timeout=600)
    return k8s


def changes(stdout: str) -> list[tuple[str, str]]:
    """(verb, type) of each finished step of `inferry up/destroy`."""
    return re.findall(r"^  (created|updated|replaced|deleted) (\S+) \S+$", stdout, re.M)


def test_up_creates_every_object_and_the_deployment_becomes_available(k8s):
    project, cluster, _ = k8s
    r = project.inferry("up", "k8s", timeout=600)
    assert ("created", "kubernetes:apps/v1:Deployment") in changes(r.stdout), r.stdout
    dep = cluster.get("deployment", NAME, NS)
    assert {c["type"]: c["status"] for c in dep["status"]["conditions"]}["Available"] == "True"
    slices = cluster.get("endpointslices", namespace=NS)["items"]
    ready = [e for s in slices if s["metadata"]["labels"].get("kubernetes.io/service-name") == NAME
             for e in s.get("endpoints") or [] if e["conditions"].get("ready")]
    assert ready, "the Service has no ready endpoint"
    secret = cluster.get("secret", f"{NAME}-secrets", NS)
    assert API_KEY in {base64.b64decode(v).decode() for v in secret["data"].values()}
    everything = cluster.kubectl("get", "deployment,replicaset,pod,service,configmap,scaledobject", "-n", NS,
                                 "-o", "json").stdout
    assert API_KEY not in everything and SECRET_KEY not in everything  # secrets only in the Secret


@pytest.mark.usefixtures("deployed")
def test_second_up_changes_nothing(k8s):
    project, cluster, _ = k8s
    before = cluster.get("deployment", NAME, NS)["metadata"]
    r = project.inferry("up", "k8s", timeout=600)
    assert changes(r.stdout) == [] and re.search(r"done in \S+: \d+ unchanged$", r.stdout, re.M), r.stdout
    after = cluster.get("deployment", NAME, NS)["metadata"]
    assert (after["generation"], after["resourceVersion"]) == (before["generation"], before["resourceVersion"])


@pytest.mark.usefixtures("deployed")
def test_an_engine_option_updates_the_deployment_in_place_and_rolls_a_new_replicaset(k8s):
    project, cluster, store = k8s
    d = stack_deployment(cluster, store, pdb_min_available=1)
    d["engine"]["max_num_seqs"] = 64
    project.set_deployment("k8s", d)
    r = project.inferry("preview", "k8s", timeout=600)
    planned = re.findall(r"^  would (\S+) (\S+) ", r.stdout, re.M)
    assert ("update", "kubernetes:apps/v1:Deployment") in planned and all(op != "replace" for op, _ in planned)
    assert ("create", "kubernetes:policy/v1:PodDisruptionBudget") in planned, r.stdout
    project.inferry("up", "k8s", timeout=600)
    sets = cluster.get("replicasets", namespace=NS)["items"]
    # the bundled stack's min_replicas (2): the rollout started the Deployment there, with no KEDA running
    assert len(sets) == 2 and sorted(s["spec"]["replicas"] for s in sets) == [0, 2]
    (live,) = [s for s in sets if s["spec"]["replicas"] == 2]
    (engine,) = [c for c in live["spec"]["template"]["spec"]["containers"] if c["name"] == "engine"]
    assert engine["args"][engine["args"].index("--max-num-seqs") + 1] == "64"
    pdb = cluster.get("poddisruptionbudget", NAME, NS)
    assert pdb["spec"]["minAvailable"] == 1 and pdb["status"]["currentHealthy"] >= 1


@pytest.mark.usefixtures("deployed")
def test_an_ingress_is_not_awaited_for_an_address_no_controller_gives(k8s):
    project, cluster, store = k8s
    d = stack_deployment(cluster, store, pdb_min_available=1, ingress={"host": "llm.example.eu"})
    d["engine"]["max_num_seqs"] = 64
    project.set_deployment("k8s", d)
    r = project.inferry("up", "k8s", timeout=300)  # pulumi-kubernetes would wait 10 minutes for an address
    assert ("created", "kubernetes:networking.k8s.io/v1:Ingress") in changes(r.stdout), r.stdout
    ingress = cluster.get("ingress", NAME, NS)
    assert ingress["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    assert "ingress: http://llm.example.eu" in r.stdout or "endpoint: http://llm.example.eu" in r.stdout


def test_more_gpus_than_any_node_has_fails_in_bounded_time_with_the_schedulers_reason(k8s):
    project, cluster, store = k8s
    d = stack_deployment(cluster, store, namespace="too-big", schedule_timeout_s=5)
    d["engine"]["tensor_parallel_size"] = 16  # each node has 8
    d["provider"]["gpu_count"] = 16
    project.write_stack("big", d, {"apiKey": API_KEY, "s3AccessKey": ACCESS_KEY, "s3SecretKey": SECRET_KEY})
    r = project.inferry("up", "big", check=False, timeout=300)  # the Deployment alone would wait 40 minutes
    assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr
    assert "did not roll out: pod inferry-llama-3-1-8b-instruct-" in r.stderr
    # the real node, when the session has it (tests/support/node.py), is tainted for the tests that mean it
    assert re.search(r"cannot be scheduled: 0/[23] nodes are available: (1 node\(s\) had untolerated taint\(s\), )?"
                     r"2 Insufficient nvidia.com/gpu", r.stderr), r.stderr
    assert "engine.tensor_parallel_size" in r.stderr
    project.pulumi("destroy", "--yes", "--stack", "big", timeout=600)


@pytest.mark.usefixtures("deployed")
def test_destroy_removes_everything_and_the_namespace_it_created(k8s):
    project, cluster, _ = k8s
    r = project.inferry("destroy", "k8s", "--yes", timeout=600)
    deleted = [t for verb, t in changes(r.stdout) if verb == "deleted"]
    assert deleted.index("kubernetes:core/v1:Namespace") > deleted.index("kubernetes:apps/v1:Deployment")
    gone = cluster.kubectl("get", "namespace", NS, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr
    assert json.loads(project.pulumi("stack", "export", "--stack", "k8s").stdout)["deployment"].get(
        "resources") in (None, [])
