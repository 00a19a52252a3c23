"""What destroy removed from each machine: its data folders read before and after, printed and kept on file."""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from infra.errors import InferryError
from infra.targets.contract import ReplicaFacts

if TYPE_CHECKING:
    from infra.stack.stackfile import Stack

T = TypeVar("T")


@dataclass(frozen=True)
class Removal:
    """One machine's data folders: gone after destroy, or still there (kept on purpose, or not removed)."""

    source: str
    removed: tuple[str, ...]
    left: tuple[str, ...]
    unknown: str | None = None  # why it could not be read after destroy

    def line(self) -> str:
        """How destroy prints it."""
        if self.unknown:
            return f"{self.source}: not read after destroy ({self.unknown}); it held {', '.join(self.removed)}"
        text = f"{self.source}: removed {', '.join(self.removed) or 'nothing (no data was kept there)'}"
        return text + (f"; left {', '.join(self.left)}" if self.left else "")


def data_now(stack: "Stack") -> list[ReplicaFacts]:
    """Each replica's facts now; [] when the machines cannot be asked (destroy goes on without the list)."""
    from infra.lifecycle.secrets import resolver
    from infra.targets.registry import target_for

    try:
        return target_for(stack.deployment.target.kind).replica_facts(stack, resolver(stack))
    except InferryError:
        return []


def removals(before: list[ReplicaFacts], after: list[ReplicaFacts]) -> list[Removal]:
    """Each machine that held data before: what is gone now. A replica no longer there (a deleted pod) took its
    data with it; one that cannot be read now is said so."""
    now = {f.source: f for f in after}
    out = []
    for f in before:
        if not f.data:
            continue
        a = now.get(f.source)
        if a is not None and a.error and a.error.startswith("not read"):
            out.append(Removal(f.source, f.data, (), a.error))
            continue
        left = a.data if a is not None else ()
        out.append(Removal(f.source, tuple(p for p in f.data if p not in left), left))
    return out


def keep(stack_name: str, found: list[Removal], root: Path | None = None) -> Path:
    """Write what was removed to .inferry/records/NAME-destroyed-TIME.json (the record keeps it)."""
    from infra.lifecycle.journal import inferry_dir, write_state

    when = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = inferry_dir(root) / "records" / f"{stack_name}-destroyed-{when}.json"
    write_state(path, {"stack": stack_name, "destroyed_at": when, "machines": [asdict(r) for r in found]})
    return path


def destroy_recorded(stack: "Stack", destroy: Callable[[], T], say: Callable[[str], None]) -> T:
    """Run destroy; then print, and keep on file, what it removed from each machine."""
    before = data_now(stack)
    result = destroy()
    # Read again only where something was kept: a stack that held no data costs no second round of reads.
    found = removals(before, data_now(stack) if any(f.data for f in before) else [])
    for r in found:
        say(r.line())
    if found:
        say(f"what was removed is kept in {keep(stack.name, found)}")
    return result
