"""KEDA's real operator (built by scripts/tools.sh) against the suite's cluster, run outside it as a process.

It installs KEDA's own CRDs (the release's config/crd/bases, with their status subresources) over the
transcribed schemas (put back when it stops), and serves its metrics gRPC service on this machine with a
throwaway CA (the release's cert rotation needs the in-cluster Secret and webhooks, which an out-of-cluster
operator does not have).
"""
from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.cluster import CRDS as SUITE_CRDS
from tests.support.cluster import crd
from tests.support.daemons import stop, wait_http
from tests.support.realengine import TOOLS_BIN
from tests.support.standin.process import free_port

CRDS = TOOLS_BIN.parent / "keda-crds"
NAMESPACE = "keda"  # KEDA's own (cluster objects, secrets it reads)
ADAPTER_SERVICE = "keda-operator-metrics-apiserver"  # the API server checks the adapter's cert for NAME.NS.svc


def keda_binary() -> str:
    """The operator; fails loudly when it, its metrics adapter (built with it) or its CRDs are missing (no skip)."""
    binary = TOOLS_BIN / "keda"
    if not binary.exists() or not (TOOLS_BIN / "keda-adapter").exists() or not sorted(CRDS.glob("*.yaml")):
        raise RuntimeError("the KEDA tests need the operator, its adapter and its CRDs: run "
                           "`bash scripts/tools.sh cluster`")
    return str(binary)


def _certs(folder: Path, ips: tuple[str, ...]) -> None:
    """ca.crt, tls.crt, tls.key for the operator's metrics service on 127.0.0.1 and the adapter on `ips` (what
    cert rotation makes)."""
    def sh(cmd: str) -> None:
        subprocess.run(cmd, shell=True, check=True, cwd=folder, capture_output=True)

    sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 1 -subj /CN=keda-test-ca")
    sh("openssl req -newkey rsa:2048 -nodes -keyout tls.key -out tls.csr -subj /CN=keda-operator")
    names = ",".join(f"IP:{ip}" for ip in ("127.0.0.1", *ips))
    names += f",DNS:localhost,DNS:{ADAPTER_SERVICE}.{NAMESPACE}.svc"
    (folder / "ext").write_text(f"subjectAltName={names}\nextendedKeyUsage=serverAuth,clientAuth\n")
    sh("openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out tls.crt -days 1 -extfile ext")


def _restore_crds(cluster) -> None:
    """KEDA's CRDs out, the suite's transcribed ones back: the session's other tests find the cluster as it was."""
    # KEDA is stopped: the finalizer it put on an object a test left behind would hold that CRD's deletion forever.
    for kind in ("scaledobjects.keda.sh", "scaledjobs.keda.sh"):
        listed = cluster.kubectl("get", kind, "-A", "-o", "jsonpath={range .items[*]}{.metadata.namespace}/"
                                 "{.metadata.name}{\" \"}{end}", check=False).stdout.split()
        for ns, name in (item.split("/", 1) for item in listed):
            cluster.kubectl("patch", kind, name, "-n", ns, "--type=merge", "-p", '{"metadata":{"finalizers":null}}',
                            check=False)
    for f in sorted(CRDS.glob("*.yaml")):
        cluster.kubectl("delete", "-f", str(f), "--ignore-not-found", "--timeout=60s", check=False)
    ours = [crd(p) for p in sorted(SUITE_CRDS.glob("keda.sh_*.yaml"))]
    r = cluster.apply(*ours, extra=("--server-side",))
    assert r.returncode == 0, r.stderr
    names = [f"crd/{c['metadata']['name']}" for c in ours]
    cluster.kubectl("wait", "--for=condition=Established", *names, "--timeout=60s")


@contextmanager
def keda_operator(cluster, watch_namespace: str, folder: Path, *,
                  adapter_ip: str | None = None) -> Iterator[None]:
    """KEDA's operator watching one namespace, its CRDs installed; with adapter_ip, also its metrics adapter
    serving external.metrics.k8s.io to the HPA controller from this machine's adapter_ip (tests/support/
    keda_adapter.py). Everything stopped, and the cluster's API as before, at the end."""
    binary = keda_binary()
    for crd_file in sorted(CRDS.glob("*.yaml")):
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crd_file))
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    health, grpc, certs = free_port(), free_port(), folder / "keda-certs"
    certs.mkdir(exist_ok=True)
    _certs(certs, (adapter_ip,) if adapter_ip else ())
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "KEDA_CLUSTER_OBJECT_NAMESPACE": NAMESPACE,
           "POD_NAMESPACE": NAMESPACE, "WATCH_NAMESPACE": watch_namespace}
    argv = [binary, f"--kubeconfig={cluster.kubeconfig}", "--leader-elect=false", "--enable-cert-rotation=false",
            "--enable-webhook-patching=false", "--enable-apiservice-patching=false", f"--cert-dir={certs}",
            "--metrics-bind-address=127.0.0.1:0", f"--health-probe-bind-address=127.0.0.1:{health}",
            f"--metrics-service-bind-address=127.0.0.1:{grpc}"]
    with open(folder / "keda.log", "wb") as log:  # the child keeps its own descriptor
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_http(f"http://127.0.0.1:{health}/readyz", proc, folder / "keda.log", "KEDA")
        if adapter_ip is None:
            yield
        else:
            from tests.support.keda_adapter import metrics_adapter

            with metrics_adapter(cluster, env, certs, adapter_ip, grpc, folder):
                yield
    finally:
        stop(proc)
        _restore_crds(cluster)
