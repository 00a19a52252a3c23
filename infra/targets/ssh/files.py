"""Rendered files onto a host: compare content hashes and modes, upload only the difference, atomically."""
from __future__ import annotations

import hashlib
import posixpath
import shlex
from dataclasses import dataclass

from infra.targets.ssh.session import Session


@dataclass(frozen=True)
class RemoteFile:
    """One file the target owns on a host."""

    path: str  # absolute path on the host
    content: str
    mode: int = 0o644

    @property
    def sha256(self) -> str:
        """Hash of the content, compared with the host's sha256sum."""
        return hashlib.sha256(self.content.encode()).hexdigest()


def state_command(paths: list[str]) -> str:
    """Print 'MODE SHA256 PATH' for each existing path (one round trip). A file that is there but cannot be read
    ends the command with exit 3 and the reason on stderr: read as missing, it would be reported as drift."""
    quoted = " ".join(shlex.quote(p) for p in paths)
    return (f"for p in {quoted}; do [ -f \"$p\" ] || continue; "
            "m=$(stat -c %a \"$p\") && h=$(sha256sum \"$p\") || exit 3; printf '%s %s\\n' \"$m\" \"$h\"; done; true")


def parse_state(text: str) -> dict[str, tuple[int, str]]:
    """{path: (mode, sha256)} from state_command's output."""
    out = {}
    for line in text.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3:
            out[parts[2].lstrip("*")] = (int(parts[0], 8), parts[1])
    return out


def differing(files: list[RemoteFile], state: dict[str, tuple[int, str]]) -> list[RemoteFile]:
    """The files whose content or mode on the host differs from what is wanted."""
    return [f for f in files if state.get(f.path) != (f.mode, f.sha256)]


def upload(s: Session, files: list[RemoteFile], step: str) -> None:
    """Write the given files (parents created first, one round trip), each atomically."""
    if not files:
        return
    parents = sorted({posixpath.dirname(f.path) for f in files})
    s.run("mkdir -p " + " ".join(shlex.quote(p) for p in parents), step)
    for f in files:
        s.put(f.path, f.content.encode(), f.mode, step)
