"""What differs between two stacks' deployments, field by field."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra.stack.config import Deployment

# Sections that must stay byte-identical for a migration: a move changes where, not what is served.
PINNED = ("model", "engine")


@dataclass(frozen=True)
class FieldDiff:
    """One field whose value differs (None: absent on that side)."""

    path: str
    a: Any
    b: Any

    @property
    def section(self) -> str:
        """The top-level section, e.g. 'target'."""
        return self.path.split(".", 1)[0]

    def line(self) -> str:
        """'  target.hosts[0].address: 203.0.113.10 -> 10.0.0.2'."""
        return f"  {self.path}: {_show(self.a)} -> {_show(self.b)}"


def _show(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, dict) and set(value) <= {"config", "env"}:
        return "{" + ", ".join(f"{k}: {v}" for k, v in value.items() if v) + "}"  # a secret reference, not a value
    return str(value)


def _walk(path: str, a: Any, b: Any, out: list[FieldDiff]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) | set(b) <= {"config", "env"}:  # compare secret references whole
            if a != b:
                out.append(FieldDiff(path, a, b))
            return
        for key in sorted(set(a) | set(b)):
            _walk(f"{path}.{key}" if path else key, a.get(key), b.get(key), out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _walk(f"{path}[{i}]", x, y, out)
    elif a != b:
        out.append(FieldDiff(path, a, b))


def diff(a: Deployment, b: Deployment) -> list[FieldDiff]:
    """Every differing field, by path, in section order."""
    out: list[FieldDiff] = []
    _walk("", _dump(a), _dump(b), out)
    return out


def _dump(d: Deployment) -> dict[str, Any]:
    """The deployment as JSON, model.weights as its key prefix: s3://BUCKET/x (old form) and x are one place."""
    data = d.model_dump(mode="json", exclude_none=True)
    if d.model.weights_prefix is not None:
        data["model"]["weights"] = d.model.weights_prefix
    return data


def pinned_changes(diffs: list[FieldDiff]) -> list[FieldDiff]:
    """The differences in sections a migration must not change (model, engine)."""
    return [d for d in diffs if d.section in PINNED]
