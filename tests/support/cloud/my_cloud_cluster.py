"""A stand-in cloud cluster for examples/: `GpuCluster`, a dynamic resource whose kubeconfig is a secret Output.

Its create makes, in the test's real control plane (the admin kubeconfig file named by MY_CLOUD_ADMIN_KUBECONFIG,
its context by MY_CLOUD_ADMIN_CONTEXT), a ServiceAccount, a ClusterRole with the rights inferry's Deployment uses
and their binding, and returns a kubeconfig holding a token of that account: it is known only once the resource
is created, as a cloud's cluster credentials are. Its delete removes them, after appending to MY_CLOUD_EVENTS
what inferry still had in the cluster at that moment. Standalone (pulumi and the kubernetes client, which
inferry depends on): the program and Pulumi's provider host import it from PYTHONPATH, as a provider package.
"""
from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path
from typing import Any

import pulumi
import yaml  # type: ignore[import-untyped]
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider

ADMIN, ADMIN_CONTEXT, EVENTS = "MY_CLOUD_ADMIN_KUBECONFIG", "MY_CLOUD_ADMIN_CONTEXT", "MY_CLOUD_EVENTS"
SA_NAMESPACE = "kube-system"
TOKEN_SECONDS = 24 * 3600
INFERRY = "app.kubernetes.io/name=inferry"  # on every object of inferry's (infra/targets/kubernetes/names.py)
# What inferry's Kubernetes target creates and watches (infra/targets/kubernetes/component.py, rollout.py).
RULES = [
    {"apiGroups": [""], "resources": ["namespaces", "secrets", "configmaps", "services", "persistentvolumeclaims"],
     "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["pods", "pods/log", "events", "endpoints"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["apps"], "resources": ["deployments", "replicasets"],
     "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
]


def _admin() -> Any:
    """An ApiClient with the control plane's admin credentials (the cloud's own, never the program's)."""
    from kubernetes import config  # type: ignore[import-untyped]

    return config.new_client_from_config(config_file=os.environ[ADMIN], context=os.environ.get(ADMIN_CONTEXT))


def _account(name: str) -> str:
    return f"my-cloud-{name}"


def _kubeconfig(name: str, token: str) -> str:
    """A self-contained kubeconfig: the admin's cluster (CA inlined), the account's token, one context `name`."""
    admin = yaml.safe_load(Path(os.environ[ADMIN]).read_text())
    context = os.environ.get(ADMIN_CONTEXT) or admin["current-context"]
    (ctx,) = [c["context"] for c in admin["contexts"] if c["name"] == context]
    (cluster,) = [dict(c["cluster"]) for c in admin["clusters"] if c["name"] == ctx["cluster"]]
    if "certificate-authority" in cluster:
        ca = Path(cluster.pop("certificate-authority")).read_bytes()
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    # One line of JSON, as pulumi_eks's Cluster.kubeconfig_json gives it (pulumi-kubernetes reads either form).
    return json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": name,
                           "clusters": [{"name": name, "cluster": cluster}],
                           "users": [{"name": _account(name), "user": {"token": token}}],
                           "contexts": [{"name": name, "context": {"cluster": name, "user": _account(name)}}]})


def inferry_objects(api: Any) -> list[str]:
    """kind/namespace/name of every object of inferry's still in the cluster (any namespace)."""
    from kubernetes import client

    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    found = [f"Namespace/{n.metadata.name}" for n in core.list_namespace(label_selector=INFERRY).items]
    for kind, lister in (("Deployment", apps.list_deployment_for_all_namespaces),
                         ("Pod", core.list_pod_for_all_namespaces), ("Service", core.list_service_for_all_namespaces),
                         ("Secret", core.list_secret_for_all_namespaces)):
        found += [f"{kind}/{o.metadata.namespace}/{o.metadata.name}" for o in lister(label_selector=INFERRY).items]
    return found


def _record(event: str, name: str, left: list[str]) -> None:
    with open(os.environ[EVENTS], "a") as f:
        f.write(json.dumps({"event": event, "cluster": name, "inferry_left": left, "time": time.time()}) + "\n")


class ClusterProvider(ResourceProvider):
    """Create and remove a cluster's credentials; another name is another cluster (replaced)."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        """The account, its role and binding, and a kubeconfig with a token of the account."""
        from kubernetes import client

        name, api = str(props["name"]), _admin()
        account, rbac = _account(name), client.RbacAuthorizationV1Api(api)
        client.CoreV1Api(api).create_namespaced_service_account(SA_NAMESPACE, {"metadata": {"name": account}})
        rbac.create_cluster_role({"metadata": {"name": account}, "rules": RULES})
        rbac.create_cluster_role_binding({"metadata": {"name": account},
                                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                      "name": account},
                                          "subjects": [{"kind": "ServiceAccount", "name": account,
                                                        "namespace": SA_NAMESPACE}]})
        request = {"spec": {"audiences": [], "expirationSeconds": TOKEN_SECONDS}}
        token = client.CoreV1Api(api).create_namespaced_service_account_token(account, SA_NAMESPACE, request)
        _record("create", name, inferry_objects(api))
        return CreateResult(id_=account, outs={"name": name, "kubeconfig": _kubeconfig(name, token.status.token)})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """Another name is another cluster."""
        changed = olds["name"] != news["name"]
        return DiffResult(changes=changed, replaces=["name"] if changed else [], stables=["kubeconfig"],
                          delete_before_replace=True)

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        """Record what inferry left, then remove the binding, the role and the account (its tokens die with it)."""
        from kubernetes import client

        api = _admin()
        _record("delete", str(props["name"]), inferry_objects(api))
        rbac = client.RbacAuthorizationV1Api(api)
        rbac.delete_cluster_role_binding(id_)
        rbac.delete_cluster_role(id_)
        client.CoreV1Api(api).delete_namespaced_service_account(id_, SA_NAMESPACE)


class GpuCluster(Resource, module="my-cloud", name="GpuCluster"):
    """A GPU cluster: its kubeconfig (a secret: a token of the cluster's account) has one context, the name."""

    kubeconfig: pulumi.Output[str]

    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None):
        secret = pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"])
        super().__init__(ClusterProvider(), name, {"name": name, "kubeconfig": None},
                         pulumi.ResourceOptions.merge(opts, secret))
