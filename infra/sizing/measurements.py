"""Measured throughput per stack, kept at .inferry/measurements/<stack>.json (written by `inferry bench`)."""
from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from infra.errors import InferryError
from infra.stack.project import project_root
from infra.stack.stackfile import STACK_NAME



@dataclass(frozen=True)
class Measurement:
    """One recorded throughput figure for a stack."""

    stack: str
    tokens_per_second: float
    recorded_at: str
    details: dict[str, Any] = field(default_factory=dict)


def measurements_dir(root: Path | None = None) -> Path:
    """Where measurements live: $INFERRY_STATE_DIR/measurements, else <project root>/.inferry/measurements."""
    if root is None and os.environ.get("INFERRY_STATE_DIR"):
        return Path(os.environ["INFERRY_STATE_DIR"]) / "measurements"
    return (root or project_root()) / ".inferry" / "measurements"


def _path(stack_name: str, root: Path | None) -> Path:
    if not STACK_NAME.fullmatch(stack_name):
        raise InferryError(f"{stack_name!r} is not a valid stack name", "use letters, digits, '.', '_' or '-'")
    return measurements_dir(root) / f"{stack_name}.json"


def record_measured_tps(stack_name: str, tps: float, details: Mapping[str, Any] | None = None,
                        root: Path | None = None) -> Measurement:
    """Store the measured output tokens/s of one replica of a stack (replaces the previous figure)."""
    if not tps > 0:
        raise InferryError(f"measured tokens/s must be positive, got {tps}", "check the benchmark's output")
    m = Measurement(stack_name, float(tps), datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    dict(details or {}))
    path = _path(stack_name, root)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:  # write then rename: readers never see half a file
            json.dump(m.__dict__, fh, indent=2, sort_keys=True)
        os.replace(tmp, path)
    except OSError as e:
        raise InferryError(f"cannot record the measurement in {e.filename or path}: {e.strerror}",
                           "set INFERRY_STATE_DIR to a writable folder (default: .inferry in the project)",
                           where=stack_name) from None
    return m


def load_measured_tps(stack_name: str, root: Path | None = None) -> Measurement | None:
    """The recorded measurement for a stack, or None when there is none (or it is unreadable)."""
    path = _path(stack_name, root)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return Measurement(raw["stack"], float(raw["tokens_per_second"]), raw["recorded_at"],
                           dict(raw.get("details") or {}))
    except (OSError, ValueError, KeyError, TypeError):
        return None
