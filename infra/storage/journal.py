"""A local record of objects this machine finished uploading, so a re-run can resume without the store's help.

Object metadata (x-amz-meta-sha256) is the first choice, but some S3-compatible servers keep
metadata only in memory (rclone serve s3 loses it on restart), so completed files are also
journaled here, keyed by endpoint, bucket and prefix.
"""
from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

from infra.storage.local import cache_dir
from infra.storage.manifest import FileEntry
from infra.storage.settings import StoreSettings


class Journal:
    """{path: (size, sha256)} of files completed under one store prefix; saved after every file."""

    def __init__(self, settings: StoreSettings, prefix: str):
        ident = f"{settings.endpoint.rstrip('/')}|{settings.bucket}|{prefix.strip('/')}"
        self.path = cache_dir().parent / "journal" / f"{hashlib.sha256(ident.encode()).hexdigest()[:24]}.json"
        self._lock = threading.Lock()
        try:
            self.done: dict[str, list] = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.done = {}

    def has(self, e: FileEntry) -> bool:
        """True when this exact file (size and sha256) was completed under the prefix."""
        return self.done.get(e.path) == [e.size, e.sha256]

    def record(self, e: FileEntry) -> None:
        """Remember a completed file (best effort: a read-only home only costs re-sending)."""
        with self._lock:
            self.done[e.path] = [e.size, e.sha256]
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.path.with_suffix(f".{threading.get_ident()}.tmp")
                tmp.write_text(json.dumps(self.done))
                tmp.replace(self.path)
            except OSError:
                pass

    def forget(self, paths: list[str]) -> None:
        """Drop entries about to be overwritten (a new upload of the path has begun)."""
        with self._lock:
            for p in paths:
                self.done.pop(p, None)
