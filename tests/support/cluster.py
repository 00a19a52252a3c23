"""A real Kubernetes control plane for tests: etcd, kube-apiserver, kube-controller-manager and kube-scheduler
(built by `scripts/tools.sh cluster`), run by kwokctl with fake GPU nodes from kwok.

Nodes are kwok's: they keep the capacity and labels given here (nvidia.com/gpu, the GPU product label the
target's affinity uses), pods scheduled to them are marked Running and Ready, but no container runs: serving
on Kubernetes is not proven by this tier. Custom resources the target renders (KEDA, the HTTP add-on,
prometheus-operator) get their CRDs from tests/schemas/crds.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.realengine import TOOLS_BIN

ROOT = Path(__file__).resolve().parents[2]
NEEDED = ("kwokctl", "kwok", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl",
          "pulumi-resource-kubernetes")
CRDS = ROOT / "tests" / "schemas" / "crds"
FAKE = "kwok.x-k8s.io/node=fake"  # the annotation of the nodes kwok plays


def cluster_tools() -> dict[str, str]:
    """Every binary the cluster needs, by name; fails loudly when one is missing (no skip)."""
    path = f"{TOOLS_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    found = {n: shutil.which(n, path=path) for n in NEEDED}
    missing = [n for n, p in found.items() if p is None]
    if missing:
        raise RuntimeError(f"the cluster tests need {', '.join(missing)}: run `bash scripts/tools.sh cluster`")
    return found  # type: ignore[return-value]


def crd(schema_file: Path) -> dict[str, Any]:
    """A CustomResourceDefinition from one of tests/schemas/crds (group, version and kind from its header;
    the plural from its file name, GROUP_PLURAL.yaml)."""
    doc = yaml.safe_load(schema_file.read_text())
    group, version = doc["apiVersion"].split("/")
    plural = schema_file.stem.split("_", 1)[1]
    kind = doc["kind"]
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
                     "versions": [{"name": version, "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": doc["openAPIV3Schema"]}}]}}


def gpu_node(name: str, gpus: int, product: str) -> dict[str, Any]:
    """A fake node with GPUs as NVIDIA's device plugin and feature discovery would label and size it."""
    capacity = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {FAKE.split("=")[0]: FAKE.split("=")[1]},
                         "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                    "kubernetes.io/arch": "amd64", "type": "kwok", "nvidia.com/gpu.product": product}},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
            "status": {"capacity": capacity, "allocatable": capacity}}


@dataclass
class Cluster:
    """One kwokctl cluster: its kubeconfig and context, and kubectl against it."""

    name: str
    workdir: Path
    tools: dict[str, str]

    @property
    def kubeconfig(self) -> Path:
        """The cluster's own kubeconfig file."""
        return self.workdir / "kubeconfig"

    @property
    def context(self) -> str:
        """The context kwokctl names."""
        return f"kwok-{self.name}"

    def admin_config(self) -> dict[str, Any]:
        """The kubeconfig as a dict, certificate paths absolute (kwokctl writes them so)."""
        return yaml.safe_load(self.kubeconfig.read_text())

    @property
    def ca(self) -> Path:
        """The certificate authority kwokctl made: it signs the admin certificate, which the API server also
        presents to aggregated API servers as its front-proxy client."""
        return self.workdir / "clusters" / self.name / "pki" / "ca.crt"

    @property
    def server(self) -> str:
        """The API server's URL (https://127.0.0.1:PORT; it binds every address of this machine)."""
        (c,) = [c for c in self.admin_config()["clusters"] if c["name"] == self.context]
        return c["cluster"]["server"]

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        """kubectl against this cluster."""
        cmd = [self.tools["kubectl"], "--kubeconfig", str(self.kubeconfig), "--context", self.context, *args]
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=120)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
        return proc

    def apply(self, *objects: dict[str, Any], extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
        """kubectl apply of these objects (a List), with extra flags (e.g. --dry-run=server)."""
        doc = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
        return self.kubectl("apply", "-f", "-", *extra, stdin=doc, check=False)

    def get(self, kind: str, name: str = "", namespace: str | None = None) -> dict[str, Any]:
        """One object (or a list) as JSON."""
        ns = ["-n", namespace] if namespace else []
        return json.loads(self.kubectl("get", kind, *([name] if name else []), *ns, "-o", "json").stdout)

    def _kwokctl(self, *args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "KWOK_WORKDIR": str(self.workdir), "PATH": f"{TOOLS_BIN}{os.pathsep}{os.environ['PATH']}"}
        return subprocess.run([self.tools["kwokctl"], *args, "--name", self.name], env=env, capture_output=True,
                              text=True, timeout=300)

    def create(self) -> None:
        """Start the control plane from the local binaries (nothing is downloaded), then the GPU nodes and CRDs."""
        t = self.tools
        r = self._kwokctl("create", "cluster", "--runtime", "binary", "--kubeconfig", str(self.kubeconfig),
                          "--kube-apiserver-binary", t["kube-apiserver"], "--etcd-binary", t["etcd"],
                          "--kube-controller-manager-binary", t["kube-controller-manager"],
                          "--kube-scheduler-binary", t["kube-scheduler"], "--kwok-controller-binary", t["kwok"],
                          # the real node's kubelet is reached at its InternalIP (tests/support/node.py), and kwok
                          # leaves that node alone (kwokctl makes it manage all nodes: it set pods' status there)
                          "--extra-args", "kube-apiserver=kubelet-preferred-address-types=InternalIP",
                          "--extra-args", "kwok-controller=manage-all-nodes=false",
                          # the aggregation layer, as a real cluster has it (KEDA's metrics adapter serves the HPA
                          # through it): front-proxy requests trusted by the CA that signs the proxy client cert,
                          # and an APIService's Service reached at its endpoint (no kube-proxy on this side)
                          "--extra-args", f"kube-apiserver=requestheader-client-ca-file={self.ca}",
                          # the one front proxy: the API server's own client cert (kwokctl's admin, kwok-admin)
                          "--extra-args", "kube-apiserver=requestheader-allowed-names=kwok-admin",
                          "--extra-args", "kube-apiserver=requestheader-username-headers=X-Remote-User",
                          "--extra-args", "kube-apiserver=requestheader-group-headers=X-Remote-Group",
                          "--extra-args", "kube-apiserver=requestheader-extra-headers-prefix=X-Remote-Extra-",
                          "--extra-args", "kube-apiserver=enable-aggregator-routing=true",
                          "--extra-args", f"kwok-controller=manage-nodes-with-annotation-selector={FAKE}",
                          "--wait", "120s")
        if r.returncode != 0:
            raise RuntimeError(f"kwokctl create cluster failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        nodes = [gpu_node(f"gpu-{i}", 8, "NVIDIA-H100-80GB-HBM3") for i in (1, 2)]
        crds = [crd(p) for p in sorted(CRDS.glob("*.yaml"))]
        for batch in (nodes, crds):
            r = self.apply(*batch, extra=("--server-side",))
            assert r.returncode == 0, r.stderr
        self.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")

    def delete(self) -> None:
        """Stop every component and remove the cluster's files."""
        self._kwokctl("delete", "cluster")
        shutil.rmtree(self.workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    """One control plane for the session (tests create their own namespaces)."""
    c = Cluster(f"inferry-{os.getpid()}", tmp_path_factory.mktemp("kwok"), cluster_tools())
    c.create()
    try:
        yield c
    finally:
        c.delete()
