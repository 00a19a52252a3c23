"""What an update killed mid-way leaves in the local backend, and how inferry clears it without hand edits.

A Pulumi CLI killed by a signal it cannot catch (SIGKILL, a closed terminal) leaves two things behind:

- its lock (DIY backend: `.pulumi/locks/<org>/<project>/<stack>/<id>.json` under the state folder, holding the
  pid and host of the CLI that took it). Every later update of the stack is refused until it is gone. A lock
  taken on this machine by a process that no longer runs is removed, with a message; any other lock is left
  alone and the error says whose it is.
- pending operations in the stack's state. Pulumi v3.274.1 drops interrupted updates and deletes on the next
  update but keeps interrupted creates for ever (backend/snapshot.go), warning on every update that they need
  an interactive `pulumi refresh`. inferry's own steps (dynamic resources: host steps, bucket) converge whatever
  they find, so their interrupted creates are cleared after the next update (which ran them again); others
  are named with the one command that clears them.
"""
from __future__ import annotations

import json
import os
import socket
import tempfile
from pathlib import Path

PENDING_WARNING = "pending operations from previous deployment"  # the engine's warning (deployment_executor.go)
OWN_TYPES = ("pulumi-python:dynamic",)  # inferry's dynamic providers: a create run again converges


def backend_folder(env: dict[str, str], root: Path) -> Path | None:
    """The local backend's folder when the stack's state is in one (file://), else None."""
    from infra.lifecycle.pulumicli import project_backend

    url = env.get("PULUMI_BACKEND_URL") or project_backend(root) or ""
    if not url.startswith("file://"):
        return None
    path = Path(os.path.expanduser(url.removeprefix("file://")))
    return path if path.is_absolute() else root / path


def _locks(folder: Path, stack: str) -> list[Path]:
    locks = folder / ".pulumi" / "locks"
    return sorted(p for p in locks.rglob("*.json") if p.parent.name == stack) if locks.is_dir() else []


def _running(pid: int) -> bool:
    """Whether PID is a live Pulumi CLI on this machine (a reused pid of another program is not)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "pulumi"
    except OSError:
        return False


def remove_stale_locks(folder: Path, stack: str) -> tuple[list[str], list[str]]:
    """(what was removed, what holds the stack still): one line per lock."""
    removed, held = [], []
    for path in _locks(folder, stack):
        try:
            lock = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        pid, host, when = int(lock.get("pid") or 0), lock.get("hostname") or "?", lock.get("timestamp") or "?"
        who = f"pulumi pid {pid} on {host}, taken {when}"
        if host == socket.gethostname() and pid and not _running(pid):
            path.unlink(missing_ok=True)
            removed.append(f"removed the lock of an update that no longer runs ({who})")
        else:
            held.append(who)
    return removed, held


def split_pending(deployment: dict) -> tuple[list[dict], list[dict]]:
    """(interrupted creates of inferry's own steps, every other pending operation)."""
    ops = deployment.get("pending_operations") or []
    own = [op for op in ops if op.get("type") == "creating"
           and str((op.get("resource") or {}).get("type", "")).startswith(OWN_TYPES)]
    return own, [op for op in ops if op not in own]


def clear_own_pending(command, work_dir: str, env: dict[str, str], stack: str) -> tuple[int, list[str]]:
    """Clear the interrupted creates of inferry's steps (`stack export`, then `stack import` without them;
    secrets stay ciphertext); returns (how many, the URNs of pending operations left for the user)."""
    done = command.run(["stack", "export", "--stack", stack], work_dir, env)
    state = json.loads(done.stdout)
    own, other = split_pending(state.get("deployment") or {})
    if own:
        state["deployment"]["pending_operations"] = other
        with tempfile.TemporaryDirectory(prefix="inferry-state-") as tmp:  # private: 0700
            path = Path(tmp) / "state.json"
            path.write_text(json.dumps(state))
            command.run(["stack", "import", "--file", str(path), "--stack", stack], work_dir, env)
    return len(own), [str((op.get("resource") or {}).get("urn")) for op in other]
