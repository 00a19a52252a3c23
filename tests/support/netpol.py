"""NetworkPolicy enforced on the real node: kube-router's network policy controller (v2.1.0, built by
scripts/tools.sh; its router and service proxy off), run on the node as kube-proxy is, so a policy the stack renders
holds for real. It turns the policies the API server holds into iptables rules and ipsets in the node's network
namespace; traffic from the node itself (the kubelet's probes, the suite's own checks) stays allowed, as in any
cluster. When the block ends, its rules and ipsets are removed, so later tests' pods are not judged by them.

Why kube-router: kube-network-policies, the SIG's own agent, needs the kernel's nftables `queue` expression, which
these machines' kernel lacks (`nft add rule ... queue num 98` answers "No such file or directory"); iptables,
its NFQUEUE target and ipset are there. The Go module proxy serves kube-router v2.1.0 alone, a version with
reported security flaws: it runs here only on the test node, never in what inferry deploys.

`stranger(...)` runs a one-off pod in a namespace of the test's choosing and reports what it could reach: a
client standing for anything else in the cluster.
"""
from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support.daemons import stop
from tests.support.node import LABEL, TAINT
from tests.support.realengine import TOOLS_BIN

# Each URL tried until it answers 200 (a new pod's address reaches the policy agent's rules within seconds), at
# most ten times; what the last try got is printed.
PROBE = ("import sys, time, urllib.request as u\n"
         "for url in sys.argv[1:]:\n"
         "    for _ in range(10):\n"
         "        try:\n"
         "            got = u.urlopen(url, timeout=3).status\n"
         "        except Exception as e:\n"
         "            got = type(e).__name__\n"
         "        if got == 200:\n"
         "            break\n"
         "        time.sleep(1)\n"
         "    print(url, got)\n")


def service_range(cluster) -> str:
    """The cluster's Service IP range, as its ServiceCIDR object says (the API server's own, `kubernetes`)."""
    return cluster.kubectl("get", "servicecidr", "kubernetes", "-o", "jsonpath={.spec.cidrs[0]}").stdout.strip()


def _router(node, *args: str) -> list[str]:
    exe = TOOLS_BIN / "kube-router"
    if not exe.is_file():
        raise RuntimeError("the NetworkPolicy tests need kube-router: run `bash scripts/tools.sh cluster`")
    return ["nsenter", f"--net=/run/netns/{node.lay.netns}", str(exe), *args]


@contextmanager
def enforcing(node, cluster) -> Iterator[None]:
    """kube-router's policy controller running on the real node while the block runs; its rules and ipsets gone
    after (--cleanup-config), so the node is as before for the tests that follow."""
    log = open(node.lay.run / "kube-router.log", "w")
    proc = subprocess.Popen(_router(
        node, "--run-router=false", "--run-service-proxy=false", "--run-firewall=true",
        f"--kubeconfig={node.lay.run / 'kubeconfig'}", f"--hostname-override={node.name}",
        f"--service-cluster-ip-range={service_range(cluster)}", "--enable-pod-egress=false", "--enable-ipv6=false",
        "--health-port=0", "--metrics-port=0", "--v=1"), stdout=log, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while "KUBE-ROUTER-FORWARD" not in node.netns_exec("iptables-save", "-t", "filter").stdout:
            assert proc.poll() is None and time.monotonic() < deadline, (node.lay.run / "kube-router.log").read_text()[-3000:]
            time.sleep(1)
        time.sleep(3)  # its first full sync of the policies, pods and namespaces
        yield
    finally:
        stop(proc)
        _remove_rules(node)
        log.close()


OURS = ("KUBE-ROUTER-", "KUBE-NWPLCY-", "KUBE-POD-FW-")  # the policy controller's iptables chains


def _remove_rules(node) -> None:
    """Remove the policy controller's iptables chains (and the jumps to them) and its ipsets from the node: what
    `kube-router --cleanup-config` should do, but v2.1.0's does nothing for the policy controller (it runs the
    controller's Cleanup with no iptables handlers set). Stale rules would refuse later tests' pods that reuse an
    address."""
    import shlex

    lines = node.netns_exec("iptables-save", "-t", "filter").stdout.splitlines()
    chains = [ln[1:].split()[0] for ln in lines if ln.startswith(":") and ln[1:].startswith(OURS)]
    for ln in lines:  # the jumps from the built-in chains into ours
        parts = shlex.split(ln)
        if parts[:1] == ["-A"] and not parts[1].startswith(OURS) and any(c.startswith(OURS) for c in parts):
            node.netns_exec("iptables", "-t", "filter", "-D", *parts[1:])
    for c in chains:
        node.netns_exec("iptables", "-t", "filter", "-F", c)
    for c in chains:
        node.netns_exec("iptables", "-t", "filter", "-X", c)
    for name in node.netns_exec("ipset", "list", "-n").stdout.split():
        if name.startswith(("KUBE-SRC-", "KUBE-DST-", "kube-router-")):
            node.netns_exec("ipset", "destroy", name, check=False)


def stranger(cluster, namespace: str, image: str, *urls: str) -> dict[str, str]:
    """{url: status or error name} as a one-off pod in NAMESPACE (made if missing) sees each URL."""
    name = f"stranger-{int(time.time() * 1000) % 10**8}"
    if cluster.kubectl("get", "namespace", namespace, check=False).returncode != 0:
        cluster.kubectl("create", "namespace", namespace)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": {
        "restartPolicy": "Never", "nodeSelector": {LABEL: "true"}, "tolerations": [{**TAINT, "operator": "Equal"}],
        "containers": [{"name": "probe", "image": image, "imagePullPolicy": "Never",
                        "command": ["python3", "-c", PROBE, *urls]}]}}
    applied = cluster.apply(pod)
    assert applied.returncode == 0, applied.stderr
    try:
        deadline = time.monotonic() + 180
        while cluster.get("pod", name, namespace).get("status", {}).get("phase") not in ("Succeeded", "Failed"):
            assert time.monotonic() < deadline, json.dumps(cluster.get("pod", name, namespace).get("status"))
            time.sleep(1)
        out = cluster.kubectl("logs", "-n", namespace, name).stdout
        return dict(line.rsplit(" ", 1) for line in out.splitlines() if line.strip())
    finally:
        cluster.kubectl("delete", "pod", name, "-n", namespace, "--wait=false", check=False)
