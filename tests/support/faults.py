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
