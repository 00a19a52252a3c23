"""A migration's journal under .inferry/migrations/: which steps finished, so a re-run resumes."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from infra.errors import InferryError
from infra.stack.project import project_root
from infra.stack.stackfile import Stack

JOURNAL_DIR = "migrations"
RATE_FILE = "transfer-rate.json"
DEFAULT_RATE = 100e6  # bytes/s between two providers' S3 endpoints when nothing was measured yet


def inferry_dir(root: Path | None = None) -> Path:
    """Where inferry keeps its own files: $INFERRY_STATE_DIR, else <project root>/.inferry (git-ignored)."""
    if root is None and os.environ.get("INFERRY_STATE_DIR"):
        return Path(os.environ["INFERRY_STATE_DIR"])
    return (root or project_root()) / ".inferry"


def fingerprint(a: Stack, b: Stack) -> str:
    """Changes when either stack's deployment changes: a journal of other stack files is stale."""
    text = a.deployment.model_dump_json() + "\0" + b.deployment.model_dump_json()
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def write_state(path: Path, data: dict) -> None:
    """Write inferry's own JSON file atomically (a crash never leaves half of one); a clear error if it cannot."""
    _mkdir(path.parent)
    tmp = path.with_suffix(".tmp")
    with _state_errors(path):
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        os.replace(tmp, path)  # atomic: a crash never leaves half a journal


def _mkdir(folder: Path) -> None:
    with _state_errors(folder):
        folder.mkdir(parents=True, exist_ok=True)


@contextlib.contextmanager
def _state_errors(path: Path) -> Iterator[None]:
    """An unwritable state folder as an InferryError naming it."""
    try:
        yield
    except OSError as e:
        raise InferryError(f"cannot write {e.filename or path}: {e.strerror}",
                           "set INFERRY_STATE_DIR to a writable folder (default: .inferry in the project)",
                           where="inferry state") from None


@dataclass
class Journal:
    """Finished steps of one migration (source -> target), keyed to both stacks' contents."""

    path: Path
    fingerprint: str
    done: dict[str, str] = field(default_factory=dict)
    stale: bool = False

    @classmethod
    def open(cls, root: Path | None, a: Stack, b: Stack) -> Journal:
        """The journal for a -> b; a journal written for other stack contents is discarded."""
        path = inferry_dir(root) / JOURNAL_DIR / f"{a.name}--{b.name}.json"
        _mkdir(path.parent)  # now, not after the first step: a run must be able to record what it did
        fp = fingerprint(a, b)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return cls(path, fp)
        if data.get("fingerprint") != fp:
            return cls(path, fp, stale=True)
        return cls(path, fp, dict(data.get("done", {})))

    def is_done(self, step: str) -> bool:
        """Whether a step finished in an earlier run."""
        return step in self.done

    def mark(self, step: str, detail: str) -> None:
        """Record a finished step."""
        self.done[step] = detail
        write_state(self.path, {"fingerprint": self.fingerprint, "done": self.done, "updated": time.time()})

    def finish(self) -> None:
        """The migration completed: forget it, so the next one starts from the beginning."""
        self.path.unlink(missing_ok=True)


def load_rate(root: Path | None) -> tuple[float, str]:
    """(bytes/s, 'measured' | 'default') for estimating a weight copy."""
    try:
        rate = float(json.loads((inferry_dir(root) / JOURNAL_DIR / RATE_FILE).read_text())["bytes_per_s"])
        if rate > 0:
            return rate, "measured"
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return DEFAULT_RATE, "default"


def record_rate(root: Path | None, nbytes: int, seconds: float) -> None:
    """Remember the rate of a real copy (only copies big enough to mean something)."""
    if nbytes >= 1 << 20 and seconds > 0:
        write_state(inferry_dir(root) / JOURNAL_DIR / RATE_FILE, {"bytes_per_s": nbytes / seconds, "bytes": nbytes,
                                                "seconds": seconds, "measured": time.time()})
