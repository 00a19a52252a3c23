"""A local record of what this machine sent under a store prefix, so a re-run can resume without the store's help.

Object metadata (x-amz-meta-sha256) is the first choice, but some S3-compatible servers keep
metadata only in memory (rclone serve s3 loses it on restart), so completed files are also
journaled here, keyed by endpoint, bucket and prefix. So are multipart uploads still open: their
upload id, the file they carry (size, sha256) and, in an append-only log, every part the store
acknowledged with its ETag. A killed push resumes such an upload instead of re-sending the file.
"""
from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from infra.storage.local import cache_dir
from infra.storage.manifest import FileEntry
from infra.storage.settings import StoreSettings


@dataclass(frozen=True)
class OpenUpload:
    """A multipart upload this machine started and did not finish: resumable while the file is unchanged."""

    path: str
    key: str
    upload_id: str
    size: int
    sha256: str
    part_size: int

    def carries(self, e: FileEntry, key: str) -> bool:
        """True when the upload is of exactly this file's content at this key."""
        return (self.key, self.size, self.sha256) == (key, e.size, e.sha256)


class Journal:
    """Files completed and uploads open under one store prefix; saved as they change.

    Completed and forgotten files go to an append-only log, one short line each, so a forget is on disk
    before the upload that replaces the file starts (a push killed mid-file must not skip it next run);
    `flush` folds the log into the record.
    """

    def __init__(self, settings: StoreSettings, prefix: str):
        ident = f"{settings.endpoint.rstrip('/')}|{settings.bucket}|{prefix.strip('/')}"
        name = hashlib.sha256(ident.encode()).hexdigest()[:24]
        self.path = cache_dir().parent / "journal" / f"{name}.json"
        self._uploads_path = self.path.with_name(f"{name}.uploads.json")
        self._log_path = self.path.with_name(f"{name}.done.log")
        self._lock = threading.Lock()
        self.done: dict[str, list] = _load(self.path)
        _replay(self._log_path, self.done)
        self.uploads = {p: OpenUpload(**u) for p, u in _load(self._uploads_path).items()
                        if isinstance(u, dict) and set(u) == set(OpenUpload.__dataclass_fields__)}
        self.resumed: set[str] = set()  # upload ids this run resumed (not to be swept)

    def has(self, e: FileEntry) -> bool:
        """True when this exact file (size and sha256) was completed under the prefix."""
        return self.done.get(e.path) == [e.size, e.sha256]

    def record(self, e: FileEntry) -> None:
        """Remember a completed file (best effort: a read-only home only costs re-sending)."""
        with self._lock:
            self.done[e.path] = [e.size, e.sha256]
            _append_lines(self._log_path, [[e.path, e.size, e.sha256]])

    def forget(self, paths: list[str]) -> None:
        """Drop entries about to be overwritten (a new upload of the path has begun), on disk before it starts:
        a push killed mid-way must not find the old record of a file it was replacing (--repair)."""
        with self._lock:
            for p in paths:
                self.done.pop(p, None)
            _append_lines(self._log_path, [[p] for p in paths])

    def flush(self) -> None:
        """Fold the log of completed files into the record (the record first: replaying the log again is
        harmless)."""
        with self._lock:
            if self._log_path.exists():
                _save(self.path, self.done)
                self._log_path.unlink(missing_ok=True)

    def begin_upload(self, u: OpenUpload) -> None:
        """Remember a multipart upload just created (before any of its parts is sent)."""
        with self._lock:
            self.uploads[u.path] = u
            _save(self._uploads_path, {p: asdict(x) for p, x in self.uploads.items()})
            self._parts_path(u.upload_id).unlink(missing_ok=True)

    def part_done(self, upload_id: str, number: int, etag: str) -> None:
        """Append one acknowledged part: one short line per part, never a rewrite of the whole journal."""
        with self._lock:
            # best effort: an unjournaled part is checked against the local bytes instead
            _append_lines(self._parts_path(upload_id), [[number, etag]])

    def parts(self, upload_id: str) -> dict[int, str]:
        """{part number: ETag} of the parts the store acknowledged for an upload."""
        found: dict[int, str] = {}
        for entry in _json_lines(self._parts_path(upload_id)):
            try:
                number, etag = entry
                found[int(number)] = str(etag)
            except (ValueError, TypeError):
                continue
        return found

    def end_upload(self, path: str) -> None:
        """Forget an upload that was completed or aborted."""
        with self._lock:
            u = self.uploads.pop(path, None)
            if u is None:
                return
            _save(self._uploads_path, {p: asdict(x) for p, x in self.uploads.items()})
            self._parts_path(u.upload_id).unlink(missing_ok=True)

    def _parts_path(self, upload_id: str) -> Path:
        return self.path.with_name(f"{self.path.stem}.{hashlib.sha256(upload_id.encode()).hexdigest()[:16]}.parts")


def _load(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _replay(path: Path, done: dict[str, list]) -> None:
    """Apply the log of completed ([path, size, sha256]) and forgotten ([path]) files to done."""
    for entry in _json_lines(path):
        if isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str):
            done[entry[0]] = entry[1:]
        elif isinstance(entry, list) and len(entry) == 1 and isinstance(entry[0], str):
            done.pop(entry[0], None)


def _append_lines(path: Path, entries: list[list]) -> None:
    """Append JSON lines to a log (best effort, as _save)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            # Each line starts with its newline: one a kill cut short stays a line of its own.
            f.write("".join("\n" + json.dumps(x) for x in entries))
    except OSError:
        pass


def _json_lines(path: Path) -> list:
    """The JSON values of a log's lines, skipping any a kill cut short."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _save(path: Path, doc: dict) -> None:
    """Write a JSON document atomically (best effort: a read-only home only costs re-sending)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(doc))
        tmp.replace(path)
    except OSError:
        pass
