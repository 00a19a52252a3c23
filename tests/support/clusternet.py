"""This machine as a client on the cluster's network: each Service of a namespace reachable at its ClusterIP
and by its cluster DNS name.

Reachable: a route to each ClusterIP through the real node, where kube-proxy translates and balances as it does
for the pods (clusters that advertise their Service IPs to the network, over BGP or a VPN, give their users the
same), kept current from a watch of the Services. By name: the cluster's DNS, CoreDNS with its kubernetes plugin
(built by scripts/tools.sh), answering for `cluster.local` from the API server as it does in a cluster; commands
wrapped by `argv()` use it as their resolver (a resolv.conf of their own, in a mount namespace of their own).
"""
from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.daemons import wait_http
from tests.support.realengine import TOOLS_BIN

DNS_IP = "127.0.1.53"  # where CoreDNS listens (port 53, as a resolver must); nothing else on this machine uses it
READY = f"http://{DNS_IP}:8181/ready"  # CoreDNS's ready plugin: 200 once the kubernetes plugin has synced


def coredns() -> str:
    """The CoreDNS binary; fails loudly when it is missing (no skip)."""
    found = shutil.which("coredns", path=str(TOOLS_BIN))
    if found is None:
        raise RuntimeError("the cluster tests need coredns: run `bash scripts/tools.sh cluster`")
    return found


def corefile(cluster) -> str:
    """cluster.local answered from the API server (Services, their Endpoints), as a cluster's CoreDNS does."""
    return (f"cluster.local:53 {{\n  bind {DNS_IP}\n  errors\n  ready {DNS_IP}:8181\n"
            f"  kubernetes cluster.local {{\n    kubeconfig {cluster.kubeconfig} {cluster.context}\n  }}\n}}\n")


class ClusterNet(threading.Thread):
    """Routes and names of one namespace's Services, while started; close() stops CoreDNS and removes every
    route."""

    def __init__(self, node, cluster, namespace: str, folder: Path):
        super().__init__(daemon=True)
        from kubernetes import client, config

        api = config.new_client_from_config(config_file=str(cluster.kubeconfig), context=cluster.context)
        self.core, self.node, self.namespace = client.CoreV1Api(api), node, namespace
        self.ips, self.stop = {}, threading.Event()
        self.resolv, self.dns_log = folder / "resolv.conf", folder / "coredns.log"
        self.resolv.write_text(f"nameserver {DNS_IP}\noptions timeout:1\n")
        (folder / "Corefile").write_text(corefile(cluster))
        with open(self.dns_log, "wb") as log:  # the child keeps its own descriptor
            self.dns = subprocess.Popen([coredns(), "-conf", str(folder / "Corefile")], cwd=folder, stdout=log,
                                        stderr=subprocess.STDOUT)

    def name(self, service: str) -> str:
        """The Service's cluster DNS name."""
        return f"{service}.{self.namespace}.svc.cluster.local"

    def url(self, service: str, port: int = 8000) -> str | None:
        """http://CLUSTER-IP:PORT of the Service while it exists, else None."""
        ip = self.ips.get(service)
        return f"http://{ip}:{port}" if ip else None

    def argv(self, cmd: list[str]) -> list[str]:
        """cmd run in a mount namespace of its own whose /etc/resolv.conf names the cluster's DNS (nothing else
        on this machine sees it)."""
        return ["unshare", "--mount", "sh", "-c", 'mount --bind "$0" /etc/resolv.conf && exec "$@"',
                str(self.resolv), *cmd]

    def resolve(self, name: str) -> str:
        """What a command wrapped by argv() gets for name (glibc's resolver through CoreDNS), '' if nothing."""
        got = subprocess.run(self.argv(["getent", "ahostsv4", name]), capture_output=True, text=True, timeout=10)
        return got.stdout.split()[0] if got.stdout.split() else ""

    def wait_ready(self, timeout: float = 30) -> None:
        """Until CoreDNS has synced with the API server."""
        wait_http(READY, self.dns, self.dns_log, "coredns", timeout)

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
        # Never take a live Service out of `ips`, even for a moment: each short watch lists every Service again,
        # and a poller reading url() between a pop and the re-add saw the Service gone.
        ip = ip if ip and ip != "None" else None
        old = self.ips.get(service)
        if ip is None:
            self.ips.pop(service, None)
        if old and old != ip:
            self._route("del", old)
        if ip:
            self._route("replace", ip)
            self.ips[service] = ip

    def _route(self, verb: str, ip: str) -> None:
        subprocess.run(["ip", "route", verb, f"{ip}/32", "via", self.node.lay.address], check=False,
                       capture_output=True)

    def close(self) -> None:
        """Stop watching and CoreDNS, and remove the routes."""
        self.stop.set()
        self.dns.terminate()
        try:
            self.dns.wait(10)
        except subprocess.TimeoutExpired:
            self.dns.kill()
            self.dns.wait()
        if self.ident is not None:  # started
            self.join(10)
        for ip in self.ips.values():
            self._route("del", ip)

    def wait_ip(self, service: str, timeout: float = 30) -> str:
        """The Service's ClusterIP once the watch has seen it."""
        deadline = time.monotonic() + timeout
        while (ip := self.ips.get(service)) is None:
            assert self.is_alive() and time.monotonic() < deadline, f"no Service {service} in {self.namespace}"
            time.sleep(0.1)
        return ip

    def wait_url(self, service: str, timeout: float = 30, port: int = 8000) -> str:
        """The Service's URL once the watch has seen it."""
        return f"http://{self.wait_ip(service, timeout)}:{port}"


@contextmanager
def cluster_net(node, cluster, namespace: str, folder: Path) -> Iterator[ClusterNet]:
    """A started ClusterNet, closed at the end."""
    net = ClusterNet(node, cluster, namespace, folder)
    try:
        net.start()
        net.wait_ready()
        yield net
    finally:
        net.close()
