"""This machine as a client on the cluster's network: each Service of a namespace reachable at its ClusterIP
and by its cluster DNS name, kept current from a watch of the Services.

Reachable: a route to each ClusterIP through the real node, where kube-proxy translates and balances as it does
for the pods (clusters that advertise their Service IPs to the network, over BGP or a VPN, give their users the
same). By name: cluster DNS is not run here; commands wrapped by `argv()` see a hosts file that maps each
Service's `NAME.NAMESPACE.svc.cluster.local` to its ClusterIP, rewritten as soon as a Service appears or goes,
which is what cluster DNS answers.
"""
from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class ClusterNet(threading.Thread):
    """Routes and names of one namespace's Services, while started; close() removes every route."""

    def __init__(self, node, cluster, namespace: str, folder: Path):
        super().__init__(daemon=True)
        from kubernetes import client, config

        api = config.new_client_from_config(config_file=str(cluster.kubeconfig), context=cluster.context)
        self.core, self.node, self.namespace = client.CoreV1Api(api), node, namespace
        self.hosts, self.ips, self.stop = folder / "hosts", {}, threading.Event()
        self.base = Path("/etc/hosts").read_text()
        self.hosts.write_text(self.base)

    def name(self, service: str) -> str:
        """The Service's cluster DNS name."""
        return f"{service}.{self.namespace}.svc.cluster.local"

    def url(self, service: str, port: int = 8000) -> str | None:
        """http://CLUSTER-IP:PORT of the Service while it exists, else None."""
        ip = self.ips.get(service)
        return f"http://{ip}:{port}" if ip else None

    def argv(self, cmd: list[str]) -> list[str]:
        """cmd run in a mount namespace of its own where /etc/hosts is this one's (nothing else sees it)."""
        return ["unshare", "--mount", "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"', str(self.hosts),
                *cmd]

    def run(self) -> None:
        from kubernetes import watch

        while not self.stop.is_set():  # short watches, so that close() ends this thread
            try:
                for event in watch.Watch().stream(self.core.list_namespaced_service, self.namespace,
                                                  timeout_seconds=2):
                    svc = event["object"]
                    self._set(svc.metadata.name, None if event["type"] == "DELETED" else svc.spec.cluster_ip)
            except Exception:  # noqa: BLE001  (the namespace is being made or deleted: watch again)
                self.stop.wait(0.2)

    def _set(self, service: str, ip: str | None) -> None:
        old = self.ips.pop(service, None)
        if old and old != ip:
            self._route("del", old)
        if ip and ip != "None":
            self._route("replace", ip)
            self.ips[service] = ip
        lines = "".join(f"{ip} {self.name(s)}\n" for s, ip in sorted(self.ips.items()))
        with open(self.hosts, "r+") as f:  # in place: the bind mount holds this inode
            f.write(self.base + lines)
            f.truncate()

    def _route(self, verb: str, ip: str) -> None:
        subprocess.run(["ip", "route", verb, f"{ip}/32", "via", self.node.lay.address], check=False,
                       capture_output=True)

    def close(self) -> None:
        """Stop watching and remove the routes."""
        self.stop.set()
        self.join(10)
        for ip in self.ips.values():
            self._route("del", ip)

    def wait_url(self, service: str, timeout: float = 30) -> str:
        """The Service's URL once the watch has seen it."""
        deadline = time.monotonic() + timeout
        while (url := self.url(service)) is None:
            assert self.is_alive() and time.monotonic() < deadline, f"no Service {service} in {self.namespace}"
            time.sleep(0.1)
        return url


@contextmanager
def cluster_net(node, cluster, namespace: str, folder: Path) -> Iterator[ClusterNet]:
    """A started ClusterNet, closed at the end."""
    net = ClusterNet(node, cluster, namespace, folder)
    net.start()
    try:
        yield net
    finally:
        net.close()
