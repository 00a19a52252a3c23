"""KEDA's real operator (built by scripts/tools.sh) against the suite's cluster, run outside it as a process.

It installs KEDA's own CRDs (the release's config/crd/bases, with their status subresources) over the
transcribed schemas, and serves its metrics gRPC service on this machine with a throwaway CA (the release's
cert rotation needs the in-cluster Secret and webhooks, which an out-of-cluster operator does not have).
"""
from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.realengine import TOOLS_BIN

CRDS = TOOLS_BIN.parent / "keda-crds"
NAMESPACE = "keda"  # KEDA's own (cluster objects, secrets it reads)


def keda_binary() -> str:
    """The operator; fails loudly when it or its CRDs are missing (no skip)."""
    binary = TOOLS_BIN / "keda"
    if not binary.exists() or not sorted(CRDS.glob("*.yaml")):
        raise RuntimeError("the KEDA tests need the operator and its CRDs: run `bash scripts/tools.sh cluster`")
    return str(binary)


def _certs(folder: Path) -> None:
    """ca.crt, tls.crt, tls.key for the operator's metrics service on 127.0.0.1 (what cert rotation makes)."""
    def sh(cmd: str) -> None:
        subprocess.run(cmd, shell=True, check=True, cwd=folder, capture_output=True)

    sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 1 -subj /CN=keda-test-ca")
    sh("openssl req -newkey rsa:2048 -nodes -keyout tls.key -out tls.csr -subj /CN=keda-operator")
    (folder / "ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n")
    sh("openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out tls.crt -days 1 -extfile ext")


@contextmanager
def keda_operator(cluster, watch_namespace: str, folder: Path) -> Iterator[subprocess.Popen]:
    """KEDA's operator watching one namespace, its CRDs installed; stopped at the end."""
    binary = keda_binary()
    for crd in sorted(CRDS.glob("*.yaml")):
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crd))
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    certs = folder / "keda-certs"
    certs.mkdir(exist_ok=True)
    _certs(certs)
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "KEDA_CLUSTER_OBJECT_NAMESPACE": NAMESPACE,
           "POD_NAMESPACE": NAMESPACE, "WATCH_NAMESPACE": watch_namespace}
    argv = [binary, f"--kubeconfig={cluster.kubeconfig}", "--leader-elect=false", "--enable-cert-rotation=false",
            "--enable-webhook-patching=false", "--enable-apiservice-patching=false", f"--cert-dir={certs}",
            "--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0",
            "--metrics-service-bind-address=127.0.0.1:0"]
    with open(folder / "keda.log", "wb") as log:  # the child keeps its own descriptor
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        time.sleep(0.5)
        assert proc.poll() is None, (folder / "keda.log").read_text()[-3000:]
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
