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
    """Files completed and uploads open under one store prefix; saved as they change."""

    def __init__(self, settings: StoreSettings, prefix: str):
        ident = f"{settings.endpoint.rstrip('/')}|{settings.bucket}|{prefix.strip('/')}"
        name = hashlib.sha256(ident.encode()).hexdigest()[:24]
        self.path = cache_dir().parent / "journal" / f"{name}.json"
        self._uploads_path = self.path.with_name(f"{name}.uploads.json")
        self._lock = threading.Lock()
        self.done: dict[str, list] = _load(self.path)
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
            _save(self.path, self.done)

    def forget(self, paths: list[str]) -> None:
        """Drop entries about to be overwritten (a new upload of the path has begun)."""
        with self._lock:
            for p in paths:
                self.done.pop(p, None)

    def begin_upload(self, u: OpenUpload) -> None:
        """Remember a multipart upload just created (before any of its parts is sent)."""
        with self._lock:
            self.uploads[u.path] = u
            _save(self._uploads_path, {p: asdict(x) for p, x in self.uploads.items()})
            self._parts_path(u.upload_id).unlink(missing_ok=True)

    def part_done(self, upload_id: str, number: int, etag: str) -> None:
        """Append one acknowledged part: one short line per part, never a rewrite of the whole journal."""
        line = json.dumps([number, etag]) + "\n"
        with self._lock:
            try:
                with open(self._parts_path(upload_id), "a") as f:
                    f.write(line)
            except OSError:
                pass  # best effort: an unjournaled part is checked against the local bytes instead

    def parts(self, upload_id: str) -> dict[int, str]:
        """{part number: ETag} of the parts the store acknowledged for an upload."""
        try:
            lines = self._parts_path(upload_id).read_text().splitlines()
        except OSError:
            return {}
        found: dict[int, str] = {}
        for line in lines:
            try:
                number, etag = json.loads(line)
                found[int(number)] = str(etag)
            except (ValueError, TypeError):
                continue  # a line cut short by a kill
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


def _save(path: Path, doc: dict) -> None:
    """Write a JSON document atomically (best effort: a read-only home only costs re-sending)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(doc))
        tmp.replace(path)
    except OSError:
        pass
