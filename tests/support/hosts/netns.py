"""Network plumbing for test hosts: a per-run /24 on a bridge, one netns + veth per host, cleanup."""
from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

# Host state lives outside /tmp and /var because hosts privatise those; /run is not overmounted.
BASE = Path("/run/inferry-testhosts")
SUBNET_PREFIX = "10.213"
NS_PREFIX = "inferry-th"


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run one `ip` command; raise with its stderr when check and it fails."""
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc


def _start_time(pid: int) -> str | None:
    """The kernel start time of a process (field 22 of /proc/PID/stat), None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _owner_token() -> str:
    """Identify this process across PID reuse: 'pid starttime'."""
    return f"{os.getpid()} {_start_time(os.getpid())}"


def _owner_alive(token: str) -> bool:
    """True when the process that wrote token still runs."""
    try:
        pid_s, start = token.split()
        return _start_time(int(pid_s)) == start
    except ValueError:
        return False


@dataclass(frozen=True)
class Slot:
    """One run's share of the machine: its /24, bridge name and state folder."""

    n: int

    @property
    def bridge(self) -> str:
        """Bridge interface name in the root namespace."""
        return f"ithbr{self.n}"

    @property
    def subnet(self) -> str:
        """The run's private /24."""
        return f"{SUBNET_PREFIX}.{self.n}.0/24"

    @property
    def gateway(self) -> str:
        """The bridge's address: what hosts reach the test machine at."""
        return f"{SUBNET_PREFIX}.{self.n}.1"

    @property
    def dir(self) -> Path:
        """State folder of the run (keys, host folders)."""
        return BASE / str(self.n)

    def address(self, index: int) -> str:
        """Address of host number index (2..254)."""
        return f"{SUBNET_PREFIX}.{self.n}.{index}"

    def netns(self, name: str) -> str:
        """Network namespace name of a host."""
        return f"{NS_PREFIX}{self.n}-{name}"

    def veth(self, index: int) -> str:
        """Root-side veth name of host number index."""
        return f"ith{self.n}v{index}"


def kill_netns_pids(ns: str) -> None:
    """SIGKILL every process in a network namespace (sshd sessions outlive their listener)."""
    for pid in ip("netns", "pids", ns, check=False).stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def remove_host_net(ns: str, veth: str) -> None:
    """Delete a host's veth and namespace; safe when already gone."""
    kill_netns_pids(ns)
    ip("link", "del", veth, check=False)
    ip("netns", "del", ns, check=False)


def _cleanup_slot(n: int) -> None:
    """Remove everything a (dead) run left: namespaces, veths, bridge, state."""
    slot = Slot(n)
    prefix = f"{NS_PREFIX}{n}-"
    for line in ip("netns", "list", check=False).stdout.splitlines():
        ns = line.split()[0] if line.strip() else ""
        if ns.startswith(prefix):
            remove_host_net(ns, "")
    for line in ip("-o", "link", "show", check=False).stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(f"ith{n}v"):
            ip("link", "del", name, check=False)
    ip("link", "del", slot.bridge, check=False)
    shutil.rmtree(slot.dir, ignore_errors=True)


def _slot_in_use(n: int) -> bool:
    """True when a live run owns slot n (or something else already uses its bridge name)."""
    owner = Slot(n).dir / "owner"
    if owner.exists():
        return _owner_alive(owner.read_text().strip())
    return ip("link", "show", Slot(n).bridge, check=False).returncode == 0


def claim_slot() -> Slot:
    """Clean what dead runs left and claim a free /24 for this process, under a machine-wide lock."""
    BASE.mkdir(parents=True, exist_ok=True)
    with open(BASE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for entry in BASE.iterdir():
            if entry.name.isdigit() and not _slot_in_use(int(entry.name)):
                _cleanup_slot(int(entry.name))
        for n in range(1, 255):
            if not _slot_in_use(n):
                _cleanup_slot(n)
                slot = Slot(n)
                slot.dir.mkdir(parents=True)
                (slot.dir / "owner").write_text(_owner_token() + "\n")
                make_bridge(slot)
                return slot
    raise RuntimeError(f"no free test subnet left under {SUBNET_PREFIX}.0.0/16")


def make_bridge(slot: Slot) -> None:
    """Create the run's bridge with the gateway address."""
    ip("link", "add", slot.bridge, "type", "bridge")
    ip("addr", "add", f"{slot.gateway}/24", "dev", slot.bridge)
    ip("link", "set", slot.bridge, "up")


def release_slot(slot: Slot) -> None:
    """Tear down the whole run: every host namespace, the bridge, the state folder."""
    _cleanup_slot(slot.n)


def add_host_net(slot: Slot, index: int, ns: str) -> None:
    """Create netns ns with eth0 = slot.address(index)/24 wired to the run's bridge."""
    veth, peer = slot.veth(index), f"ith{slot.n}p{index}"
    remove_host_net(ns, veth)
    ip("neigh", "flush", "to", slot.address(index), check=False)
    ip("netns", "add", ns)
    ip("link", "add", veth, "type", "veth", "peer", "name", peer)
    ip("link", "set", veth, "master", slot.bridge)
    ip("link", "set", veth, "up")
    ip("link", "set", peer, "netns", ns)
    in_ns = ("netns", "exec", ns, "ip")
    ip(*in_ns, "link", "set", peer, "name", "eth0")
    ip(*in_ns, "addr", "add", f"{slot.address(index)}/24", "dev", "eth0")
    ip(*in_ns, "link", "set", "eth0", "up")
    ip(*in_ns, "link", "set", "lo", "up")
    ip(*in_ns, "route", "add", "default", "via", slot.gateway)
