"""Helpers of the fault tests: a run of `inferry` that can be interrupted, its processes, what it left behind."""
from __future__ import annotations

import json
import re
import subprocess
import tempfile
from pathlib import Path

from tests.support.realengine import Project


class Run:
    """`inferry ARGS` in the project, the leader of its own process group (as a terminal starts a command)."""

    def __init__(self, project: Project, args: tuple[str, ...]):
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([*project.inferry_argv(), *args], cwd=project.folder, env=project.env,
                                     stdout=self.log, stderr=subprocess.STDOUT, text=True, start_new_session=True)

    def wait(self, timeout: float) -> int:
        """The exit code (negative: killed by that signal)."""
        return self.proc.wait(timeout)

    def output(self) -> str:
        """Everything it printed so far."""
        self.log.seek(0)
        return self.log.read()


def descendants(pid: int) -> dict[int, str]:
    """{pid: command line} of every process below PID (children, their children, ...)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, todo = {}, [pid]
    while todo:
        p = todo.pop()
        for child, parent in parents.items():
            if parent == p and child not in found:
                found[child] = _cmdline(child)
                todo.append(child)
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def lock_files(project: Project) -> list[Path]:
    """The local backend's update locks (DIY backend: .pulumi/locks/... under the state folder)."""
    locks = project.state / ".pulumi" / "locks"
    return sorted(p for p in locks.rglob("*.json")) if locks.exists() else []


def pending(project: Project, stack: str) -> list[dict]:
    """The stack's pending operations in Pulumi's state (interrupted creates, updates, deletes)."""
    out = project.pulumi("stack", "export", "--stack", stack).stdout
    return json.loads(out)["deployment"].get("pending_operations") or []


def service_files_match(host, outputs: dict) -> list[str]:
    """The service files (as state records them) whose content on the host differs, and any temporary file an
    interrupted write left beside them."""
    wrong = [f["path"] for f in outputs["files"]
             if not host.path(f["path"]).exists() or host.path(f["path"]).read_text() != f["content"]]
    folder = host.path(outputs["service_dir"])
    leftovers = [str(p) for p in folder.iterdir() if re.search(r"\.inferry-(prev|[0-9a-f]{8})", p.name)]
    return wrong + leftovers


class FetchGate:
    """A curl wrapper on one host: the first PASS weight downloads run, the next ones wait until `release()`
    (the test stops the store meanwhile); each download's target (`-o`, never its URL) is logged."""

    def __init__(self, host, passes: int):
        import shutil
        import uuid

        from tests.support.hosts.host import SHARED

        self.host, name = host, f"gate-{uuid.uuid4().hex}"
        self.folder, d = host.shared_dir / name, f"{SHARED}/{name}"
        self.folder.mkdir()
        self.folder.chmod(0o777)
        real = shutil.which("curl", path="/usr/sbin:/usr/bin:/sbin:/bin")
        host.install("curl", f'case "$*" in *" -K -"*) ;; *) exec {real} "$@";; esac\n'
                             f'i=1; while ! mkdir {d}/call.$i 2>/dev/null; do i=$((i+1)); done\n'
                             'out=; prev=; for a; do [ "$prev" = -o ] && out=$a; prev=$a; done\n'
                             f'echo "$out" >> {d}/fetches.log\n'
                             f'if [ $i -gt {passes} ]; then touch {d}/waiting; n=0; '
                             f'while [ ! -e {d}/go ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done; fi\n'
                             f'exec {real} "$@"')

    def waiting(self) -> bool:
        """Whether a download waits behind the gate."""
        return (self.folder / "waiting").exists()

    def release(self) -> None:
        """Let the waiting downloads go."""
        (self.folder / "go").touch()

    def fetched(self) -> list[str]:
        """The file each download so far wrote to (its name without the .part suffix)."""
        log = self.folder / "fetches.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return [re.sub(r"\.part\.\d+\.\d+$", "", ln).rsplit("/", 1)[-1] for ln in lines]

    def remove(self) -> None:
        """Take the wrapper off."""
        import shutil

        (self.host.root / "bin" / "curl").unlink(missing_ok=True)
        shutil.rmtree(self.folder, ignore_errors=True)


def reboot(host) -> None:
    """Power the test host off and on: every process of it killed at once (sshd, dockerd, containers, engines),
    then what its boot starts started again: sshd, and dockerd on a docker host (nothing else)."""
    import os
    import signal
    import time

    from tests.support.hosts import docker

    deadline = time.monotonic() + 30
    while procs := descendants(host.init_pid):  # again until none: a dying daemon may still start a child
        assert time.monotonic() < deadline, f"host {host.name} kept processes alive: {procs}"
        for pid in procs:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    host.start_sshd()
    if host.options.docker:
        docker.start_daemon(host)
