"""examples/cluster-from-my-program, run as a user runs it: typed `pulumi up`, the kubeconfig another resource's Output.

Real: the Pulumi CLI and engine, its file backend, pulumi-kubernetes, the dynamic-provider plugin, the suite's
control plane and node (tests/support/cluster.py, node.py), an rclone S3 store the pods fetch from. The "other
provider" is tests/support/cloud/my_cloud_cluster.py: its GpuCluster makes a ServiceAccount with only the rights
inferry uses and returns a kubeconfig with its token (a secret Output, known once it is created); its delete
records what inferry still had in the cluster. Stand-ins: the GPU engine and the node's GPU capacity.
"""
from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import ROOT
from tests.support.example import Example, example_env, first
from tests.support.node import LABEL
from tests.support.servers.fixtures import ACCESS_KEY, SECRET_KEY
from tests.support.pods import NAME, chat, pod_of, store  # noqa: F401

pytestmark = [pytest.mark.component, pytest.mark.real_engine, pytest.mark.cluster, pytest.mark.s3]

EXAMPLE = ROOT / "examples" / "cluster-from-my-program"
API_KEY = "sk-cluster-" + "5" * 21
NS, ACCOUNT, SA_NS = "llm", "my-cloud-gpus", "kube-system"
CLUSTER, DEPLOYMENT = "pulumi-python:dynamic/my-cloud:GpuCluster", "kubernetes:apps/v1:Deployment"
NAMESPACE, PROVIDER = "kubernetes:core/v1:Namespace", "pulumi:providers:kubernetes"
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # how Pulumi shows a value a preview cannot know


@pytest.fixture
def example(cluster, node, store, tmp_path, installed):  # noqa: F811 (store: the pods test's S3 server, with the model)
    env = example_env(MY_CLOUD_ADMIN_KUBECONFIG=str(cluster.kubeconfig), MY_CLOUD_ADMIN_CONTEXT=cluster.context,
                      MY_CLOUD_EVENTS=str(tmp_path / "cloud-events.jsonl"))
    ex = Example(EXAMPLE, tmp_path / "project", installed[1], env)
    ex.project.pulumi("stack", "init", "dev", "--secrets-provider", "passphrase")
    # pinned to the real node (its label and taint: a dedicated pool's), sized for it
    ex.config({"weightsEndpoint": store.endpoint, "weightsRegion": store.region, "weightsBucket": "inferry-weights",
               "gpuPool": LABEL, "cpu": "100m", "memory": "1Gi"})
    ex.config({"apiKey": API_KEY, "s3AccessKey": ACCESS_KEY, "s3SecretKey": SECRET_KEY}, secret=True)
    yield ex
    ex.pulumi("destroy", "--yes", check=False, timeout=600)


def preview_steps(ex: Example) -> dict[str, dict]:
    """`pulumi preview --json`: its steps by (op, resource name); fails the test when the preview fails."""
    r = ex.pulumi("preview", "--json", check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    return {f"{s['op']} {s['urn'].rsplit('::', 1)[-1]}": s for s in json.loads(r.stdout)["steps"]}


def kubeconfig_of(ex: Example) -> str:
    """The GpuCluster's kubeconfig, decrypted from state in this process (never written anywhere)."""
    state = json.loads(ex.pulumi("stack", "export", "--show-secrets").stdout)
    (gpus,) = [r for r in state["deployment"]["resources"] if r["type"] == CLUSTER]
    secret = gpus["outputs"]["kubeconfig"]  # {SECRET_SIG: ..., "plaintext": the value as JSON}
    return json.loads(secret["plaintext"])


def account_api(kubeconfig: str):
    """A client of the cluster as the account of the kubeconfig (in memory: no file, no argv)."""
    from kubernetes import client, config

    return client.CoreV1Api(config.new_client_from_config_dict(yaml.safe_load(kubeconfig), context="gpus"))


def resource_version(cluster) -> str:
    return cluster.get("deployment", NAME, NS)["metadata"]["resourceVersion"]


def test_a_cluster_from_another_resource_serves_idles_and_is_destroyed_before_its_credentials(example, cluster, node):
    ex = example
    planned = preview_steps(ex)  # the kubeconfig is unknown here: the provider and the objects wait for it
    assert {"create gpus", "create llm", f"create {NAME}-deployment", f"create {NAME}-service"} <= set(planned)
    provider = planned["create llm-kubernetes-provider"]["newState"]
    assert provider["inputs"]["kubeconfig"] == UNKNOWN and provider["inputs"]["context"] == "gpus"
    assert [d.rsplit("::", 1)[-1] for d in provider["propertyDependencies"]["kubeconfig"]] == ["gpus"]
    assert cluster.kubectl("get", "serviceaccount", ACCOUNT, "-n", SA_NS, check=False).returncode != 0

    up = ex.pulumi("up", "--yes", "--skip-preview", check=False, timeout=600)
    assert up.returncode == 0, up.stdout[-4000:] + up.stderr
    pod = pod_of(cluster, NS)
    assert pod["spec"]["nodeName"] == node.name
    status, body = chat(node, cluster, NS, API_KEY, "200")
    assert status == "200" and json.loads(body)["choices"][0]["message"]["content"], body
    assert chat(node, cluster, NS, None, "401")[0] == "401"
    assert ex.output("endpoint") == f"http://{NAME}.{NS}.svc.cluster.local:8000"
    assert cluster.get("serviceaccount", ACCOUNT, SA_NS)["metadata"]["name"] == ACCOUNT

    # the objects were made with the account's token, which may not do what the admin can
    kubeconfig = kubeconfig_of(ex)
    token = yaml.safe_load(kubeconfig)["users"][0]["user"]["token"]
    assert [n.metadata.name for n in account_api(kubeconfig).list_namespace().items if n.metadata.name == NS] == [NS]
    can = cluster.kubectl("auth", "can-i", "create", "clusterrolebindings", f"--as=system:serviceaccount:{SA_NS}:{ACCOUNT}",
                          check=False)
    assert can.stdout.strip() == "no"
    # the kubeconfig and its token stay secret: nowhere in the state as exported, on disk, or in up's output
    exported = ex.pulumi("stack", "export").stdout
    on_disk = "".join(p.read_text() for p in ex.project.state.rglob("*.json"))
    assert token not in exported and token not in on_disk and token not in up.stdout + up.stderr
    assert "certificate-authority-data" not in exported  # the whole kubeconfig, not only its token
    assert set(ex.state("gpus")["kubeconfig"]) == {"4dabf18193072939515e22adb298388d", "ciphertext"}

    version, pod_uid = resource_version(cluster), pod["metadata"]["uid"]
    found = ex.run("up", "--expect-no-changes")
    assert {op for op, _, _ in found} == {"same"}, found
    assert resource_version(cluster) == version and pod_of(cluster, NS)["metadata"]["uid"] == pod_uid

    found = ex.run("destroy")
    print("steps of destroy:", found)  # the evidence, with -s
    assert first(found, "delete", DEPLOYMENT) < first(found, "delete", NAMESPACE) < first(found, "delete", CLUSTER)
    assert first(found, "delete", PROVIDER) < first(found, "delete", CLUSTER)
    deleted = [e for e in ex.cloud_events() if e["event"] == "delete"]
    assert [e["inferry_left"] for e in deleted] == [[]], deleted  # nothing of inferry's when the account went
    assert cluster.kubectl("get", "namespace", NS, check=False).returncode != 0
    assert cluster.kubectl("get", "serviceaccount", ACCOUNT, "-n", SA_NS, check=False).returncode != 0
    left = cluster.kubectl("get", "pods", "-A", "--field-selector", f"spec.nodeName={node.name}", "-o", "name").stdout
    assert left.strip() == ""
    # the account's rights went with it (its token may still authenticate a while: the API server caches it)
    with pytest.raises(Exception, match=r"\((401|403)\)"):
        account_api(kubeconfig).list_namespace()
    assert ex.project.resources("dev") == {}
