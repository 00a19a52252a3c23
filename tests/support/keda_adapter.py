"""KEDA's real metrics adapter (built by scripts/tools.sh) behind the suite's API server's aggregation layer.

It runs on this machine, as the operator does, and asks the operator for metric values over its gRPC metrics
service (TLS with the operator's throwaway CA). The API server reaches it as a cluster reaches KEDA's
keda-operator-metrics-apiserver: an APIService for external.metrics.k8s.io names a Service in KEDA's namespace;
here that Service has no selector and its one endpoint is this machine's address on the node's link (the API
server routes to endpoints: tests/support/cluster.py turns on aggregator routing and front-proxy trust). The
APIService goes first at the end: a group whose server is gone would stall discovery and namespace deletion.
"""
from __future__ import annotations

import base64
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.daemons import stop
from tests.support.keda import ADAPTER_SERVICE as SERVICE
from tests.support.keda import NAMESPACE
from tests.support.realengine import TOOLS_BIN
from tests.support.standin.process import free_port

GROUP, VERSION = "external.metrics.k8s.io", "v1beta1"


def objects(ip: str, port: int, ca: bytes) -> list[dict]:
    """The Service, its endpoint and the APIService that route the group to the adapter at ip:port."""
    meta = {"name": SERVICE, "namespace": NAMESPACE}
    return [
        {"apiVersion": "v1", "kind": "Service", "metadata": meta,
         "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port, "protocol": "TCP"}]}},
        {"apiVersion": "v1", "kind": "Endpoints", "metadata": meta,
         "subsets": [{"addresses": [{"ip": ip}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]},
        {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": f"{VERSION}.{GROUP}"},
         "spec": {"group": GROUP, "version": VERSION, "groupPriorityMinimum": 100, "versionPriority": 100,
                  "service": {"name": SERVICE, "namespace": NAMESPACE, "port": 443},
                  "caBundle": base64.b64encode(ca).decode()}},
    ]


def _wait_served(cluster, proc: subprocess.Popen, log: Path, timeout: float = 90) -> None:
    """Until the API server answers for the group through the adapter."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, f"the KEDA adapter exited {proc.returncode}:\n{log.read_text()[-3000:]}"
        r = cluster.kubectl("get", "--raw", f"/apis/{GROUP}/{VERSION}", check=False)
        if r.returncode == 0:
            return
        if time.monotonic() > deadline:
            status = cluster.kubectl("get", "apiservice", f"{VERSION}.{GROUP}", "-o", "jsonpath={.status}",
                                     check=False).stdout
            raise AssertionError(f"{GROUP} not served: {r.stderr}\nAPIService status: {status}\n"
                                 f"{log.read_text()[-3000:]}")
        time.sleep(1)


@contextmanager
def metrics_adapter(cluster, env: dict, certs: Path, ip: str, grpc_port: int, folder: Path) -> Iterator[None]:
    """The adapter serving on ip, registered with the API server; unregistered and stopped at the end."""
    binary = TOOLS_BIN / "keda-adapter"  # checked with the operator (keda_binary)
    port, kc = free_port(), str(cluster.kubeconfig)
    argv = [str(binary), f"--bind-address={ip}", f"--secure-port={port}", f"--cert-dir={certs}",
            f"--tls-cert-file={certs / 'tls.crt'}", f"--tls-private-key-file={certs / 'tls.key'}",
            f"--metrics-service-address=127.0.0.1:{grpc_port}", f"--port={free_port()}",
            f"--lister-kubeconfig={kc}", f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}"]
    log = folder / "keda-adapter.log"
    with open(log, "wb") as out:  # the child keeps its own descriptor
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    registered = objects(ip, port, (certs / "ca.crt").read_bytes())
    try:
        r = cluster.apply(*registered)
        assert r.returncode == 0, r.stderr
        _wait_served(cluster, proc, log)
        yield
    finally:
        cluster.kubectl("delete", "apiservice", f"{VERSION}.{GROUP}", "--ignore-not-found", check=False)
        for o in registered[:2]:
            cluster.kubectl("delete", o["kind"].lower(), SERVICE, "-n", NAMESPACE, "--ignore-not-found", check=False)
        stop(proc)
