"""The `Deployer` seam: up/preview/destroy/outputs for one stack, whatever runs the program."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from infra.errors import InferryError
from infra.stack.stackfile import Stack

Progress = Callable[[str], None]


@dataclass(frozen=True)
class OutputValue:
    """One stack output; a secret one is never printed."""

    value: Any
    secret: bool = False

    def shown(self) -> str:
        """How the CLI prints it."""
        return "[secret]" if self.secret else str(self.value)


_OPS = {"same": "unchanged"}
_ORDER = ("create", "update", "replace", "delete")  # then anything else, unchanged last


@dataclass(frozen=True)
class Changes:
    """What an operation did (or, for a preview, would do): counts by operation."""

    counts: dict[str, int] = field(default_factory=dict)

    def changed(self) -> int:
        """Resources created, updated, replaced or deleted."""
        return sum(n for op, n in self.counts.items() if op != "same")

    def ordered(self) -> list[tuple[str, int]]:
        """(operation, count) with changes first, in Pulumi's order, unchanged last; zero counts left out."""
        rank = lambda op: (_ORDER.index(op) if op in _ORDER else len(_ORDER) + (op == "same"), op)  # noqa: E731
        return sorted(((op, n) for op, n in self.counts.items() if n), key=lambda kv: rank(kv[0]))

    def line(self) -> str:
        """e.g. '2 create, 5 unchanged' (operation names as Pulumi's summary has them)."""
        parts = [f"{n} {_OPS.get(op, op)}" for op, n in self.ordered()]
        return ", ".join(parts) or "no resources"


class Deployer(Protocol):
    """Runs the inferry program for a stack; the Automation API in production, a harness in tests."""

    def check(self, stack: Stack) -> None:
        """InferryError now when the stack cannot be run (the commands call it before printing or asking)."""

    def preview(self, stack: Stack, progress: Progress) -> Changes:
        """What `up` would change."""

    def up(self, stack: Stack, progress: Progress) -> dict[str, OutputValue]:
        """Create or update the stack's resources; returns its outputs."""

    def refresh(self, stack: Stack, progress: Progress) -> Changes:
        """Read every resource back from where it lives (drift is recorded; the next up repairs it)."""

    def destroy(self, stack: Stack, progress: Progress) -> Changes:
        """Delete every resource of the stack."""

    def outputs(self, stack: Stack) -> dict[str, OutputValue]:
        """The outputs of the last successful up."""


def endpoints(outputs: dict[str, OutputValue], stack: str) -> list[str]:
    """The stack's endpoint URLs from its outputs (`endpoint`, and `endpoints` when several)."""
    found: list[str] = []
    for key in ("endpoint", "endpoints"):
        out = outputs.get(key)
        if out is None or out.value in (None, ""):
            continue
        values = out.value if isinstance(out.value, list) else [out.value]
        found += [str(v).rstrip("/") for v in values if str(v).rstrip("/") not in found]
    if not found:
        raise InferryError(f"stack {stack} exports no endpoint (outputs: {', '.join(sorted(outputs)) or 'none'})",
                           f"run `inferry up {stack}` first", where=stack)
    return found
