"""The host-side record of every remote change (writes, restarts), so a no-op apply is provable."""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from infra.targets.ssh.session import Session


@dataclass
class Ops:
    """Changes one step made on one host."""

    writes: list[str] = field(default_factory=list)
    restarts: int = 0

    def command(self, log_path: str) -> str:
        """Appends one line per change to the host's log (run only when something changed)."""
        lines = [f"write {w}" for w in self.writes] + ["restart"] * self.restarts
        log = shlex.quote(log_path)
        appends = "; ".join(f"echo \"$(date -u +%FT%TZ)\" {shlex.quote(x)} >> {log}" for x in lines)
        return f"mkdir -p \"$(dirname {log})\" && {{ {appends}; }}"

    def record(self, s: Session, log_path: str, step: str) -> None:
        """Append to the host's log, when there is anything to append."""
        if self.writes or self.restarts:
            s.run(self.command(log_path), step)

