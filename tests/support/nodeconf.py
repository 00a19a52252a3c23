"""The configuration files of the real node (containerd, CNI, kubelet, kube-proxy, its kubeconfig), as text.

Why each non-default value is there: tests/support/README.md, "The real node".
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

CNI_BIN = "/usr/lib/cni"  # Debian's containernetworking-plugins


@dataclass(frozen=True)
class Layout:
    """Where one node keeps its state and which addresses it has."""

    name: str
    n: int  # picks the node's subnets, so that two sessions' nodes do not meet
    run: Path  # sockets and runtime state (tmpfs)
    lib: Path  # images, containers' root filesystems, the kubelet's root (disk)

    @property
    def netns(self) -> str:
        """The node's network namespace."""
        return f"inferry-node{self.n}"

    @property
    def gateway(self) -> str:
        """This machine's end of the veth pair: what the node and its pods reach it at."""
        return f"10.217.{self.n}.1"

    @property
    def address(self) -> str:
        """The node's InternalIP, in its own namespace."""
        return f"10.217.{self.n}.2"

    @property
    def pod_cidr(self) -> str:
        """The pods' addresses, on the node's bridge."""
        return f"10.218.{self.n}.0/24"

    @property
    def cgroup_root(self) -> str:
        """The cgroup under which the kubelet puts every pod."""
        return f"/inferry-node{self.n}"

    @property
    def socket(self) -> Path:
        """containerd's CRI socket."""
        return self.run / "containerd.sock"


def containerd(lay: Layout, sandbox_image: str) -> str:
    """containerd 1.6 (config version 2): its own root, state and socket; the CRI plugin's fixes."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{lay.lib}/containerd"
state = "{lay.run}/containerd"
[grpc]
  address = "{lay.socket}"
[{cri}]
  sandbox_image = "{sandbox_image}"
  restrict_oom_score_adj = true
[{cri}.cni]
  bin_dir = "{CNI_BIN}"
  conf_dir = "{lay.run}/cni"
[{cri}.containerd]
  snapshotter = "overlayfs"
[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.runc.options]
  Root = "{lay.run}/runc"
"""


def cni(lay: Layout) -> str:
    """A bridge with NAT out of the pod subnet, hairpin for pod -> Service -> same pod; IPAM state kept here."""
    return json.dumps({"cniVersion": "0.4.0", "name": "inferry", "plugins": [
        {"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": True, "hairpinMode": True,
         "ipam": {"type": "host-local", "dataDir": f"{lay.run}/ipam", "ranges": [[{"subnet": lay.pod_cidr}]],
                  "routes": [{"dst": "0.0.0.0/0"}]}},
        {"type": "portmap", "capabilities": {"portMappings": True}}]})


def kubelet(lay: Layout, taint: dict[str, str]) -> str:
    """KubeletConfiguration for this cgroup v1 VM, with state only under the node's folders."""
    return yaml.safe_dump({
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "cgroupDriver": "cgroupfs", "failCgroupV1": False, "cgroupRoot": lay.cgroup_root,
        "containerRuntimeEndpoint": f"unix://{lay.socket}",
        "address": lay.address, "readOnlyPort": 0, "healthzBindAddress": "127.0.0.1",
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "failSwapOn": False, "podLogsDir": str(lay.lib / "pods-logs"),
        "volumePluginDir": str(lay.lib / "volume-plugins"),
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "registerWithTaints": [taint], "syncFrequency": "5s", "fileCheckFrequency": "5s",
        "serializeImagePulls": False, "resolvConf": "",
    })


def kube_proxy(lay: Layout, kubeconfig: Path) -> str:
    """kube-proxy in iptables mode inside the node's namespace; conntrack sysctls left as they are."""
    return yaml.safe_dump({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)}, "mode": "iptables", "hostnameOverride": lay.name,
        "bindAddress": lay.address, "clusterCIDR": lay.pod_cidr,
        "metricsBindAddress": "127.0.0.1:10249", "healthzBindAddress": "127.0.0.1:10256",
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
    })


def kubeconfig(admin: dict, server: str) -> str:
    """The control plane's admin kubeconfig, pointed at the API server's address as the node sees it.

    The server certificate names localhost, not that address: tls-server-name checks it against localhost.
    """
    doc = json.loads(json.dumps(admin))
    for c in doc["clusters"]:
        c["cluster"]["server"] = server
        c["cluster"]["tls-server-name"] = "localhost"
    return yaml.safe_dump(doc)
