"""Nothing half-applied: keep the files an update replaces, put them back when the new engine is unhealthy."""
from __future__ import annotations

import shlex
from dataclasses import dataclass

from infra.targets.ssh.files import RemoteFile

PREV = ".inferry-prev"  # suffix of the previous content, next to the file (same folder, same mode, same owner)


def prev_path(path: str) -> str:
    """Where the previous content of PATH is kept during an update."""
    return path + PREV


@dataclass(frozen=True)
class Changeset:
    """What one apply changes on a host, from the state read before it."""

    replaced: tuple[str, ...]  # existed with other content or mode: previous content kept
    created: tuple[str, ...]  # did not exist
    fresh: bool  # none of the service's files existed: a first apply (create)

    @classmethod
    def of(cls, change: list[RemoteFile], files: list[RemoteFile], state: dict) -> "Changeset":
        """Classify the files about to be written against the host's state."""
        return cls(tuple(f.path for f in change if f.path in state),
                   tuple(f.path for f in change if f.path not in state),
                   not any(f.path in state for f in files))

    @property
    def paths(self) -> list[str]:
        """Every path this apply writes."""
        return [*self.replaced, *self.created]


def backup_command(paths: tuple[str, ...]) -> str:
    """Copy each file to its .inferry-prev atomically (temp copy with mode and owner kept, then rename)."""
    steps = [f"cp -p {shlex.quote(p)} {shlex.quote(prev_path(p) + '.tmp')} && "
             f"mv -f {shlex.quote(prev_path(p) + '.tmp')} {shlex.quote(prev_path(p))}" for p in paths]
    # umask 077: the copy is created private before cp -p sets the source's mode (the env file stays 0600).
    return "umask 077 && " + " && ".join(steps)


def restore_command(cs: Changeset) -> str:
    """Rename every kept copy back over its file and remove the files the failed apply created."""
    moves = [f"mv -f {shlex.quote(prev_path(p))} {shlex.quote(p)}" for p in cs.replaced]
    rm = ["rm -f " + " ".join(shlex.quote(p) for p in cs.created)] if cs.created else []
    return " && ".join(moves + rm)


def drop_command(paths: list[str]) -> str:
    """Remove the kept copies (after a healthy apply, or on destroy)."""
    return "rm -f " + " ".join(shlex.quote(prev_path(p)) for p in paths)
