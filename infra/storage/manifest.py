"""The model manifest `inferry-manifest.json`: each file's path, size, sha256, xxh3-128 and part digests; written last."""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

from infra.errors import StorageError

MANIFEST_NAME = "inferry-manifest.json"
VERSION = 1  # fields added since (xxh3_128, part_size/parts) are optional: older readers ignore them
_HEX128 = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class FileEntry:
    """One file of a model: its path relative to the model folder, size, sha256, xxh3-128 and part digests (hex).

    sha256 names the content (skips, `verify`, hosts' sha256sum); xxh3-128 is the fast check a
    pull or streamed copy runs on the bytes it moves ("" in manifests written before it existed).
    `parts` holds the xxh3-128 of each `part_size` slice of a file larger than one part: a pull
    checks every part from the buffer it arrives in, whatever order parts arrive in, so nothing
    is read back from disk (empty for single-part files and in manifests written before them).
    """

    path: str
    size: int
    sha256: str
    xxh3_128: str = ""
    part_size: int = 0
    parts: tuple[str, ...] = ()


@dataclass(frozen=True)
class Manifest:
    """A complete model: its files, total bytes, where it came from and when."""

    files: tuple[FileEntry, ...]
    source: str
    created: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    @property
    def total(self) -> int:
        """Total bytes of all files."""
        return sum(f.size for f in self.files)

    def by_path(self) -> dict[str, FileEntry]:
        """The files keyed by path."""
        return {f.path: f for f in self.files}

    def to_json(self) -> str:
        """The manifest document (sorted paths, stable)."""
        files = [{k: list(v) if k == "parts" else v for k, v in asdict(f).items() if v or k in ("size", "sha256")}
                 for f in sorted(self.files, key=lambda f: f.path)]  # optional fields only when set
        doc = {"version": VERSION, "files": files, "total": self.total, "source": self.source, "created": self.created}
        return json.dumps(doc, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes, where: str = "") -> Manifest:
        """Parse a manifest; StorageError when it is not one."""
        try:
            doc = json.loads(text)
            files = tuple(_entry(f) for f in doc["files"])
            m = cls(files, str(doc.get("source", "")), str(doc.get("created", "")))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise StorageError(f"{MANIFEST_NAME} is not a valid manifest ({e})",
                               "push the model again to rewrite it", where=where) from None
        if int(doc.get("total", m.total)) != m.total:
            raise StorageError(f"{MANIFEST_NAME} total does not match its files", "push the model again", where=where)
        return m


def _entry(f: dict) -> FileEntry:
    """One file of a manifest document; ValueError when its part digests do not cover the file exactly."""
    e = FileEntry(str(f["path"]), int(f["size"]), str(f["sha256"]), str(f.get("xxh3_128", "")),
                  int(f.get("part_size", 0)), tuple(str(p) for p in f.get("parts", ())))
    if e.parts or e.part_size:
        if e.part_size <= 0 or len(e.parts) != -(-e.size // e.part_size):
            raise ValueError(f"{e.path}: {len(e.parts)} part digest(s) for {e.size} bytes in parts of {e.part_size}")
        if not all(_HEX128.fullmatch(p) for p in e.parts):
            raise ValueError(f"{e.path}: a part digest is not 32 hex digits")
    return e


def model_key(prefix: str, path: str) -> str:
    """The object key of a model file."""
    return f"{prefix.strip('/')}/{path}" if prefix.strip("/") else path


def manifest_key(prefix: str) -> str:
    """The object key of a model's manifest."""
    return model_key(prefix, MANIFEST_NAME)
