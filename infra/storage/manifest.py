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
_HEX256 = re.compile(r"[0-9a-f]{64}")
# C0 and C1 controls and DEL: a newline would become a fetch line of its own on the host, an escape sequence
# would rewrite the terminal that prints the path.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Bookkeeping files inferry keeps in a model folder (the SSH fetch's marker, the Kubernetes fetch's and check's).
RESERVED = frozenset({MANIFEST_NAME, ".inferry-manifest", ".verified", ".manifest.new"})
MAX_PATH = 1024  # S3's limit on a whole key, in bytes


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
        hostile = entry_problems(m.files)
        if hostile:
            raise StorageError(f"{MANIFEST_NAME} is refused before anything is fetched: " + "; ".join(hostile),
                               "whoever can write the bucket wrote this: check who has write access to it, then "
                               "push the model again from a trusted copy (`inferry weights push FOLDER --prefix "
                               "PREFIX`)", where=where)
        if int(doc.get("total", m.total)) != m.total:
            raise StorageError(f"{MANIFEST_NAME} total does not match its files", "push the model again", where=where)
        return m


def path_problem(path: str) -> str | None:
    """Why a manifest path could write outside the model folder or be read as syntax, or None when it is safe:
    relative, '/'-separated, no empty, '.' or '..' part, no control character, not one of inferry's own files."""
    if not path:
        return "the path is empty"
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH:
        return f"the path is longer than {MAX_PATH} bytes"
    if _CONTROL.search(path):
        return "the path holds a control character (a newline, a tab, an escape)"
    if path.startswith("/"):
        return "the path is absolute (it must be relative to the model folder)"
    if "\\" in path:
        return "the path holds a backslash (paths are '/'-separated)"
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return "the path has an empty, '.' or '..' part (it could leave the model folder)"
    if path in RESERVED:
        return f"the path is inferry's own {path}"
    return None


def entry_problems(files: tuple[FileEntry, ...]) -> list[str]:
    """Each entry a host must not act on, named by its index and its path (escaped: it is hostile text)."""
    found, seen = [], set()
    for i, e in enumerate(files):
        why = path_problem(e.path)
        if why is None and not _HEX256.fullmatch(e.sha256):
            why = "its sha256 is not 64 lowercase hex digits"
        if why is None and e.xxh3_128 and not _HEX128.fullmatch(e.xxh3_128):
            why = "its xxh3_128 is not 32 lowercase hex digits"
        if why is None and e.size < 0:
            why = "its size is negative"
        if why is None and e.path in seen:
            why = "the path is listed twice"
        seen.add(e.path)
        if why:
            found.append(f"files[{i}] {ascii(e.path)[:120]}: {why}")
    return found


def _entry(f: dict) -> FileEntry:
    """One file of a manifest document; ValueError when its part digests do not cover the file exactly."""
    if not isinstance(f["path"], str) or type(f["size"]) is not int or not isinstance(f["sha256"], str):
        raise ValueError(f"an entry's path and sha256 must be strings and its size an integer: {ascii(f)[:200]}")
    e = FileEntry(f["path"], f["size"], f["sha256"], str(f.get("xxh3_128", "")),
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
