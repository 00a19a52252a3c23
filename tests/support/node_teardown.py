"""Taking the real node down so that nothing is left: processes, containers, mounts, cgroups, network namespace.

The order matters (why: tests/support/README.md, "The real node"): containers are killed and removed through
containerd while it still runs (their shims and overlay mounts go with them), then the node's processes stop
by PID, then whatever the kubelet mounted under its root is unmounted, the cgroups are removed depth-first, and
the namespace and folders go last.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from tests.support.nodeconf import Layout

CGROUP = Path("/sys/fs/cgroup")
ORDER = ("kube-proxy", "kubelet", "containerd")
# Folders made at fixed paths whatever the configuration says: containerd 1.6's shim sockets
# (/run/containerd/s), the kubelet's device-plugin folder, the kubelet's links to container logs.
FIXED = (Path("/run/containerd"), Path("/var/lib/kubelet"), Path("/var/log/containers"))


def _mounts() -> list[str]:
    return [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]


def _netns() -> set[str]:
    return set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()


def _kill(pid: int, timeout: float = 15) -> None:
    """SIGTERM, then SIGKILL after timeout; returns when the process is gone."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    return
            except ChildProcessError:  # not our child: poll /proc
                if not Path(f"/proc/{pid}").exists() or _zombie(pid):
                    return
            time.sleep(0.1)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


class Teardown:
    """Knows the node's layout and PIDs; stop() is idempotent and safe on a half-started node."""

    def __init__(self, lay: Layout, ctr: str) -> None:
        self.lay, self.ctr = lay, ctr
        self.pids: dict[str, int] = {}
        self.netns_before: set[str] = set()
        self.made: list[Path] = []

    def hierarchies(self) -> list[Path]:
        """This machine's cgroup v1 hierarchies (cpu, memory, ..., the named systemd one)."""
        return [p for p in CGROUP.iterdir() if p.is_dir() and not p.is_symlink()]

    def before(self) -> None:
        """Note the namespaces that exist before the node (pod sandboxes add cni-* ones)."""
        self.netns_before = _netns()
        self.made = [p for p in FIXED if not p.exists()]

    def _mine(self, text: str) -> bool:
        return str(self.lay.run) in text or str(self.lay.lib) in text

    def shim_pids(self) -> list[int]:
        """containerd shims started for this node (they outlive containerd): found by its socket in argv."""
        out = []
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                try:
                    argv = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                if "containerd-shim" in argv and self._mine(argv):
                    out.append(int(proc.name))
        return out

    def cgroup_pids(self) -> set[int]:
        """Every process in the node's cgroups, in any hierarchy."""
        pids: set[int] = set()
        for h in self.hierarchies():
            for procs in (h / self.lay.cgroup_root.lstrip("/")).rglob("cgroup.procs"):
                try:
                    pids |= {int(p) for p in procs.read_text().split()}
                except OSError:
                    continue
        return pids

    def _containers(self) -> None:
        if not self.lay.socket.exists():
            return
        ctr = [self.ctr, "--address", str(self.lay.socket), "-n", "k8s.io"]
        run = lambda *a: subprocess.run([*ctr, *a], capture_output=True, text=True, timeout=60)  # noqa: E731
        for cid in run("containers", "ls", "-q").stdout.split():
            run("tasks", "kill", "-s", "SIGKILL", cid)
            run("tasks", "delete", "-f", cid)
            run("containers", "rm", cid)

    def stop(self) -> None:
        """Everything, in order."""
        self._containers()
        for name in ORDER:
            if name in self.pids:
                _kill(self.pids[name])
        for pid in self.shim_pids():
            _kill(pid, timeout=2)
        for pid in self.cgroup_pids():  # a container whose shim went first (its task is not containerd's now)
            _kill(pid, timeout=0)
        for m in sorted((m for m in _mounts() if self._mine(m) or self._pod_netns(m)), key=len, reverse=True):
            subprocess.run(["umount", "-l", m], capture_output=True)
        for ns in _netns() - self.netns_before:
            if ns.startswith("cni-"):
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        for h in self.hierarchies():
            self._rm_cgroup(h / self.lay.cgroup_root.lstrip("/"))
        subprocess.run(["ip", "netns", "del", self.lay.netns], capture_output=True)
        subprocess.run(["ip", "link", "del", f"inode{self.lay.n}h"], capture_output=True)
        self._logs()
        shutil.rmtree(self.lay.run, ignore_errors=True)
        shutil.rmtree(self.lay.lib, ignore_errors=True)
        for p in self.made:
            shutil.rmtree(p, ignore_errors=True)

    def _pod_netns(self, mount: str) -> bool:
        name = Path(mount).name
        return mount.startswith("/run/netns/cni-") and name not in self.netns_before

    def _rm_cgroup(self, path: Path) -> None:
        if not path.is_dir():
            return
        for child in path.iterdir():
            if child.is_dir():
                self._rm_cgroup(child)
        for _ in range(50):  # a cgroup whose last task just exited stays busy for a moment
            try:
                path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)

    def _logs(self) -> None:
        """The kubelet links each container's log into /var/log/containers: remove the links to this node's."""
        folder = Path("/var/log/containers")
        for link in folder.glob("*.log") if folder.is_dir() else []:
            if link.is_symlink() and self._mine(os.readlink(link)):
                link.unlink()

    def leftovers(self) -> list[str]:
        """Every trace still there, described."""
        found = [f"process {n} (pid {p})" for n, p in self.pids.items() if Path(f"/proc/{p}").exists() and not _zombie(p)]
        found += [f"containerd shim pid {p}" for p in self.shim_pids()]
        found += [f"container process pid {p}" for p in self.cgroup_pids()]
        found += [f"mount {m}" for m in _mounts() if self._mine(m) or self._pod_netns(m)]
        found += [f"cgroup {h.name}{self.lay.cgroup_root}" for h in self.hierarchies()
                  if (h / self.lay.cgroup_root.lstrip("/")).exists()]
        found += [f"network namespace {ns}" for ns in _netns() - self.netns_before
                  if ns == self.lay.netns or ns.startswith("cni-")]
        found += [f"folder {d}" for d in (self.lay.run, self.lay.lib, *self.made) if d.exists()]
        link = subprocess.run(["ip", "link", "show", f"inode{self.lay.n}h"], capture_output=True)
        found += [f"veth inode{self.lay.n}h"] if link.returncode == 0 else []
        return found
