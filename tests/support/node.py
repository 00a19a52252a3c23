"""A real Kubernetes node for the cluster tests: containerd, kubelet and kube-proxy in a network namespace of
their own, joined to the control plane of the `cluster` fixture, advertising `nvidia.com/gpu` capacity.

Pods on it really run: images come from tests/support/node_images.py (loaded without a registry), probes are
the kubelet's, Services go through kube-proxy. The node is tainted: only pods that tolerate TAINT land here
(the kwok nodes' tests never see it). Facts and reasons: tests/support/README.md, "The real node".
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import nodeconf
from tests.support.cluster import Cluster
from tests.support.node_images import SANDBOX_IMAGE, node_images
from tests.support.node_teardown import Teardown
from tests.support.realengine import TOOLS_BIN

TAINT = {"key": "inferry.test/real-node", "value": "true", "effect": "NoSchedule"}
LABEL = "inferry.test/real-node"
GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"
GPUS = 8
SYSTEM = {"containerd": "/usr/bin/containerd", "ctr": "/usr/bin/ctr", "runc": "/usr/sbin/runc",
          "bridge": f"{nodeconf.CNI_BIN}/bridge", "conntrack": "/usr/sbin/conntrack", "iptables": "/usr/sbin/iptables"}


def node_tools() -> dict[str, str]:
    """kubelet and kube-proxy (scripts/tools.sh) and Debian's runtime; fails with the installing command."""
    missing = [n for n, p in SYSTEM.items() if not os.access(p, os.X_OK)]
    if missing:
        raise RuntimeError(f"the real node needs {', '.join(missing)}: run `sudo scripts/setup.sh --test` "
                           "(containerd, containernetworking-plugins, conntrack, iptables)")
    found = {n: shutil.which(n, path=str(TOOLS_BIN)) for n in ("kubelet", "kube-proxy")}
    if None in found.values():
        raise RuntimeError("the real node needs kubelet and kube-proxy: run `bash scripts/tools.sh cluster`")
    return {**SYSTEM, **found}  # type: ignore[dict-item]


def sh(*cmd: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    """Run a command; raise with its output when it fails and check."""
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {(proc.stdout + proc.stderr)[-2000:]}")
    return proc


class Node:
    """One real node: start() brings it up Ready with its images; stop() leaves nothing behind."""

    def __init__(self, cluster: Cluster, n: int | None = None) -> None:
        self.cluster, self.tools = cluster, node_tools()
        n = n or os.getpid() % 250 + 1
        name = f"node-{n}"
        self.lay = nodeconf.Layout(name, n, Path(f"/run/inferry-node{n}"), Path(f"/var/lib/inferry-node{n}"))
        self.procs: dict[str, subprocess.Popen] = {}
        self.teardown = Teardown(self.lay, self.tools["ctr"])

    @property
    def name(self) -> str:
        """The Node object's name."""
        return self.lay.name

    def netns_exec(self, *cmd: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
        """Run a command in the node's network namespace (this machine's mounts: not `ip netns exec`)."""
        return sh("nsenter", f"--net=/run/netns/{self.lay.netns}", *cmd, timeout=timeout, check=check)

    def http(self, url: str, *curl: str, want: str = "200", timeout: float = 30) -> subprocess.CompletedProcess:
        """curl from the node's namespace until it answers `want` (kube-proxy programs a new Service within
        seconds); the last response, whatever its status (`-w` puts the status on the last line)."""
        deadline = time.monotonic() + timeout
        while True:
            r = self.netns_exec("curl", "-sS", "-m", "10", "-w", "\n%{http_code}", *curl, url, check=False)
            if r.stdout.rsplit("\n", 1)[-1] == want or time.monotonic() > deadline:
                return r
            time.sleep(0.5)

    def ctr(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """ctr against this node's containerd, in the CRI namespace."""
        return sh(self.tools["ctr"], "--address", str(self.lay.socket), "-n", "k8s.io", *args, timeout=timeout)

    def start(self, engine_images: list[str], fetch_image: str, proxy_image: str) -> None:
        """Network, containerd with the images, kubelet, kube-proxy; then wait Ready and advertise GPUs."""
        self.teardown.stop()  # what a killed session with the same number left
        self.teardown.before()
        from infra.targets.kubernetes.config import KubeGateway
        from tests.support.realengine import TOOLS_BIN

        archive = node_images(engine_images, fetch_image, proxy_image, KubeGateway.model_fields["image"].default,
                              TOOLS_BIN / "caddy")
        self._network()
        self._write_config()
        self._spawn("containerd", self.tools["containerd"], "--config", str(self.lay.run / "containerd.toml"))
        self._wait(lambda: self.lay.socket.exists(), "containerd's socket", 30)
        self.ctr("images", "import", str(archive), timeout=600)
        self._spawn("kubelet", self.tools["kubelet"], "--config", str(self.lay.run / "kubelet.yaml"),
                    "--kubeconfig", str(self.lay.run / "kubeconfig"), "--hostname-override", self.name,
                    "--node-ip", self.lay.address, "--root-dir", str(self.lay.lib / "kubelet"),
                    "--cert-dir", str(self.lay.lib / "kubelet-pki"),
                    "--node-labels", f"{LABEL}=true,nvidia.com/gpu.product={GPU_PRODUCT}")
        self._spawn("kube-proxy", self.tools["kube-proxy"], "--config", str(self.lay.run / "kube-proxy.yaml"))
        self._wait(self._ready, f"node {self.name} Ready", 120)
        patch = f'[{{"op":"add","path":"/status/capacity/nvidia.com~1gpu","value":"{GPUS}"}}]'
        self.cluster.kubectl("patch", "node", self.name, "--subresource=status", "--type=json", "-p", patch)
        self._wait(lambda: self._allocatable_gpus() == GPUS, "nvidia.com/gpu allocatable", 60)

    def _network(self) -> None:
        lay, host_end = self.lay, f"inode{self.lay.n}h"
        sh("ip", "netns", "add", lay.netns)
        sh("ip", "link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", lay.netns)
        sh("ip", "addr", "add", f"{lay.gateway}/24", "dev", host_end)
        sh("ip", "link", "set", host_end, "up")
        for cmd in (("ip", "link", "set", "lo", "up"), ("ip", "addr", "add", f"{lay.address}/24", "dev", "eth0"),
                    ("ip", "link", "set", "eth0", "up"), ("ip", "route", "add", "default", "via", lay.gateway),
                    ("sysctl", "-qw", "net.ipv4.ip_forward=1"),
                    ("sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1")):
            self.netns_exec(*cmd)

    def _write_config(self) -> None:
        lay = self.lay
        for d in (lay.run / "cni", lay.lib):
            d.mkdir(parents=True, exist_ok=True)
        server = self.cluster.server.replace("127.0.0.1", lay.gateway)
        files = {"containerd.toml": nodeconf.containerd(lay, SANDBOX_IMAGE), "cni/10-inferry.conflist": nodeconf.cni(lay),
                 "kubelet.yaml": nodeconf.kubelet(lay, TAINT),
                 "kube-proxy.yaml": nodeconf.kube_proxy(lay, lay.run / "kubeconfig"),
                 "kubeconfig": nodeconf.kubeconfig(self.cluster.admin_config(), server)}
        for rel, text in files.items():
            (lay.run / rel).write_text(text)
        for hierarchy in self.teardown.hierarchies():  # the kubelet wants its cgroup root to exist
            (hierarchy / lay.cgroup_root.lstrip("/")).mkdir(exist_ok=True)

    def _spawn(self, name: str, *cmd: str) -> None:
        log = open(self.lay.run / f"{name}.log", "w")
        self.procs[name] = subprocess.Popen(["nsenter", f"--net=/run/netns/{self.lay.netns}", *cmd], stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self.teardown.pids[name] = self.procs[name].pid

    def _wait(self, done, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited {p.returncode}:\n{self.log(name)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no {what} after {timeout} s:\n" + "\n".join(self.log(n) for n in self.procs))
            time.sleep(0.5)

    def _ready(self) -> bool:
        r = self.cluster.kubectl("get", "node", self.name, "-o",
                                 "jsonpath={.status.conditions[?(@.type=='Ready')].status}", check=False)
        return r.stdout.strip() == "True"

    def _allocatable_gpus(self) -> int:
        r = self.cluster.kubectl("get", "node", self.name, "-o", r"jsonpath={.status.allocatable.nvidia\.com/gpu}")
        return int(r.stdout.strip() or 0)

    def log(self, name: str, lines: int = 30) -> str:
        """The last lines of one node process's log."""
        path = self.lay.run / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return f"--- {name} ---\n" + "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Delete the pods still here, stop every process, remove every trace (tests/support/node_teardown.py)."""
        if "kubelet" in self.procs and self.procs["kubelet"].poll() is None:
            self.cluster.kubectl("delete", "pods", "--all-namespaces", "--field-selector", f"spec.nodeName={self.name}",
                                 "--grace-period=1", "--wait=true", "--timeout=90s", check=False)
        self.cluster.kubectl("delete", "node", self.name, "--wait=false", check=False)
        self.teardown.stop()
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait()

    def leftovers(self) -> list[str]:
        """What stop() failed to remove (empty when the machine is as before start())."""
        return self.teardown.leftovers()


@pytest.fixture(scope="session")
def node(cluster) -> Iterator[Node]:
    """A real node, Ready, with the stand-in images of every engine, the fetch image and the proxy image."""
    from infra.engines.spec import PROXY_IMAGE
    from infra.targets.kubernetes.config import KubernetesTarget
    from tests.support.hosts.docker import image_names

    n = Node(cluster)
    try:
        engines = [i for i in image_names() if i != PROXY_IMAGE]
        n.start(engines, KubernetesTarget.model_fields["fetch_image"].default, PROXY_IMAGE)
        yield n
    finally:
        n.stop()
