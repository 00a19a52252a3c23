"""Download one object into a local file, resumable inside the file.

Parts land in FILE.inferry-part. When the manifest has part digests, each part is checked
against its own from the buffer it arrives in, in any order, and nothing is read back; else the
file is hashed as its written prefix grows (hashing.WrittenHasher). Each finished part is
appended to FILE.inferry-parts with its digest (the manifest's xxh3-128, or an xxh3-64 of its
own), after a header naming the object (size, part size, the manifest's digest). A pull
that was killed or failed leaves both behind; the next one reads back each recorded part,
keeps it when its digest still matches (the page cache may have lost it in a crash, or the
file been edited) and fetches only the other parts with ranged GETs. Every byte is still
checked against the manifest (part by part, or the whole file) before it is renamed into place.
"""
from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import xxhash

from infra.errors import StorageError
from infra.storage.engine import FileJob, Pool, ranges, run_parts
from infra.storage.hashing import CHUNK as READ_CHUNK
from infra.storage.hashing import WrittenHasher, check_for
from infra.storage.local import PARTIAL_SUFFIX, PARTS_SUFFIX, SharedFd
from infra.storage.manifest import FileEntry
from infra.storage.progress import Meter
from infra.storage.transfer import Store, check_size, read_chunks

_local = threading.local()


class PartLog:
    """Which parts of a partial file are written, each with its xxh3-64: appended to as parts finish."""

    def __init__(self, path: Path, entry: FileEntry, part_size: int, want: str):
        self.path = path
        head = {"size": entry.size, "part_size": part_size, "want": want}
        self.header = json.dumps(head | {"parts": True} if entry.parts else head)  # logs from before: unchanged
        self.digest_len = 32 if entry.parts else 16
        self._lock = threading.Lock()
        self._removed = False

    def load(self) -> dict[int, str]:
        """{part index: digest} recorded for this very object; {} when none, or for another object."""
        try:
            head, *lines = self.path.read_text().splitlines()
        except (OSError, ValueError):
            return {}
        if head != self.header:
            return {}
        found = {}
        for line in lines:
            index, _, digest = line.partition(" ")
            if index.isdigit() and len(digest) == self.digest_len:  # a line cut short by a kill is ignored
                found[int(index)] = digest
        return found

    def start(self) -> None:
        """Begin a new log (the partial file starts empty)."""
        with self._lock:
            self.path.write_text(self.header + "\n")

    def add(self, index: int, digest: str) -> None:
        """Record one written part (one short appended line)."""
        with self._lock:
            if self._removed:  # a part that finished after its file failed: the log is gone for good
                return
            with open(self.path, "a") as f:
                f.write(f"{index} {digest}\n")

    def remove(self) -> None:
        """Forget the log (the file is complete, or not worth resuming)."""
        with self._lock:
            self._removed = True
            self.path.unlink(missing_ok=True)


def download(pool: Pool, store: Store, key: str, entry: FileEntry, dest: Path, progress: Meter) -> FileJob:
    """Download an object into dest (via dest.inferry-part), resuming a partial file; every byte checked.

    With part digests in the manifest, parts are the pushed ones and each is checked as it
    arrives; else parts are written in parallel and the file hashed while the written prefix
    grows (WrittenHasher). Either way the check costs no time after the last byte arrives.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + PARTIAL_SUFFIX)
    by_part = bool(entry.parts)
    part_size = entry.part_size if by_part else store.settings.part_size_for(entry.size)
    check = check_for(entry)
    log = PartLog(dest.with_name(dest.name + PARTS_SUFFIX), entry, part_size, check.want)
    have = log.load() if tmp.is_file() else {}
    if not have:
        log.start()
    file = SharedFd(tmp, os.O_RDWR | os.O_CREAT | (0 if have else os.O_TRUNC))
    os.ftruncate(file.fd, entry.size)
    hasher = None if by_part else WrittenHasher(file.fd, entry.size, check.new)
    new = xxhash.xxh3_128 if by_part else xxhash.xxh3_64
    wrote, corrupt = [bool(have)], [False]

    def part(index: int, offset: int, length: int) -> None:
        want = entry.parts[index] if by_part else have.get(index)
        with file.use() as fd:
            if index in have and _part_digest(fd, offset, length, new) == want:
                if hasher is not None:
                    hasher.kept(offset, length)
                progress.kept(length)
                return
            digest = new()
            for at, data in read_chunks(store, key, offset, length):
                _pwrite_all(fd, data, at)
                digest.update(data)
                if hasher is not None:
                    hasher.written(at, data)
        got = digest.hexdigest()
        if by_part and got != want:
            corrupt[0] = True  # the part matched what was received: the stored object itself is bad
            raise StorageError(f"{entry.path}: xxh3-128 of part {index + 1} of {len(entry.parts)} {got[:12]}… "
                               f"does not match the manifest's {want[:12]}…", "the stored object is corrupt: push "
                               "the model again", where=store.settings.where(key))
        log.add(index, got)
        wrote[0] = True
        progress(length)

    def finish(_: list) -> None:
        got = hasher.hexdigest() if hasher is not None else check.want  # by part: every part matched already
        file.release()
        if got != check.want:
            _discard(tmp, log)  # the parts matched what was received: the stored object itself is bad
            raise StorageError(f"{entry.path}: {check.name} {got[:12]}… does not match the manifest's "
                               f"{check.want[:12]}…", "the stored object is corrupt: push the model again",
                               where=store.settings.where(key))
        os.replace(tmp, dest)
        log.remove()

    def failed(err: BaseException) -> None:
        file.release()
        if corrupt[0] or not wrote[0]:
            _discard(tmp, log)  # nothing worth keeping; else the next run resumes the file

    return run_parts(pool, ranges(entry.size, part_size), part, finish, failed,
                     ready=pool.lookup(check_size, store, key, entry.size))


def _part_digest(fd: int, offset: int, length: int, new: Callable[[], Any]) -> str:
    """The digest of bytes already in the partial file (read back to check a part before reusing it)."""
    buf = getattr(_local, "buf", None)
    if buf is None:
        buf = _local.buf = memoryview(bytearray(READ_CHUNK))
    digest, end = new(), offset + length
    while offset < end:
        n = os.preadv(fd, [buf[: min(READ_CHUNK, end - offset)]], offset)
        if n <= 0:
            break
        digest.update(buf[:n])
        offset += n
    return digest.hexdigest()


def _discard(tmp: Path, log: PartLog) -> None:
    tmp.unlink(missing_ok=True)
    log.remove()


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    while data:
        n = os.pwrite(fd, data, offset)
        data, offset = data[n:], offset + n
