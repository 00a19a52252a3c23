"""Digests of objects that arrive part by part, out of order: in memory (streamed copies) or on disk (pulls)."""
from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import xxhash

from infra.storage.engine import Cancelled
from infra.storage.manifest import FileEntry

CHUNK = 8 << 20  # reads of a file to hash it: large enough that each syscall feeds the hash for a while
_local = threading.local()


@dataclass(frozen=True)
class Check:
    """How a transfer checks the bytes it moves against a manifest entry."""

    name: str
    new: Callable[[], Any]
    want: str


class Digests:
    """sha256 and xxh3-128 of the same bytes in one pass: what push records and verify checks.

    With a `part_size`, also the xxh3-128 of each part_size slice (the manifest's part digests).
    """

    def __init__(self, part_size: int = 0) -> None:
        self._sha, self._xxh = hashlib.sha256(), xxhash.xxh3_128()
        self._part_size, self._left = part_size, part_size
        self._part = xxhash.xxh3_128()
        self.parts: list[str] = []

    def update(self, data: bytes | bytearray | memoryview) -> None:
        """Feed all of them."""
        self._sha.update(data)
        self._xxh.update(data)
        if not self._part_size:
            return
        view = memoryview(data)
        while view:
            take = view[: self._left]
            self._part.update(take)
            self._left -= len(take)
            view = view[len(take):]
            if not self._left:
                self._end_part()

    def _end_part(self) -> None:
        self.parts.append(self._part.hexdigest())
        self._part, self._left = xxhash.xxh3_128(), self._part_size

    def hexdigest(self) -> tuple[str, str]:
        """(sha256, xxh3-128) in hex."""
        return self._sha.hexdigest(), self._xxh.hexdigest()

    def part_digests(self) -> list[str]:
        """The xxh3-128 of every part fed, the last one possibly short (call once, after the last update)."""
        if self._part_size and self._left != self._part_size:
            self._end_part()
        return self.parts


def check_for(entry: FileEntry) -> Check:
    """xxh3-128 when the manifest has it, else sha256.

    Both catch a flipped or missing byte; xxh3 runs at memory speed where sha256 manages ~2 GB/s
    a core, so a pull on a small machine is bound by the network, not by its own check. Neither
    guards against someone who can write the bucket: the manifest sits beside the objects.
    """
    if entry.xxh3_128:
        return Check("xxh3-128", xxhash.xxh3_128, entry.xxh3_128)
    return Check("sha256", hashlib.sha256, entry.sha256)


class OrderedHasher:
    """A digest (sha256 unless `new` says otherwise) of parts that arrive out of order, kept nowhere (a copy).

    The part whose turn it is gets hashed at once; a part that arrives early is copied aside
    (at most `ahead` of them, beyond that its thread waits), so workers rarely block. Parts are
    queued in order on a FIFO pool, so the part being waited for is always running: no deadlock.
    Memory of a streamed copy: at most (workers + width x ahead) parts.
    """

    def __init__(self, ahead: int = 2, new: Callable[[], Any] = hashlib.sha256) -> None:
        self._h = new()
        self._next = 0
        self._early: dict[int, bytes] = {}
        self._ahead = ahead
        self._cond = threading.Condition()
        self._error: BaseException | None = None

    def feed(self, index: int, data: bytes | bytearray | memoryview) -> None:
        """Hash part `index` now if it is its turn, else keep a copy until it is."""
        with self._cond:
            while self._next != index and len(self._early) >= self._ahead and self._error is None:
                self._cond.wait()
            if self._error is not None:
                raise Cancelled() from self._error
            if self._next != index:
                self._early[index] = bytes(data)
                return
        chunk: bytes | bytearray | memoryview | None = data
        while chunk is not None:
            self._h.update(chunk)  # only the thread whose turn it is gets here; hashlib drops the GIL
            with self._cond:
                self._next += 1
                chunk = self._early.pop(self._next, None)
                self._cond.notify_all()

    def fail(self, error: BaseException) -> None:
        """Release every waiter: the file failed."""
        with self._cond:
            self._error = error
            self._early.clear()
            self._cond.notify_all()

    def hexdigest(self) -> Any:
        """The digest of everything fed (a Digests pair when `new` is Digests)."""
        return self._h.hexdigest()


class WrittenHasher:
    """A digest (sha256 unless `new` says otherwise) of a file written out of order, taken as its prefix grows.

    The worker that writes the part at the front hashes it from memory, then carries on over
    every part already written after it (read back from the page cache); a worker that finds
    another one hashing only records its part. No worker waits and nothing is copied aside, so
    hashing overlaps the download and at the end only the last part is left to hash.
    """

    def __init__(self, fd: int, size: int, new: Callable[[], Any] = hashlib.sha256) -> None:
        self._fd, self._size = fd, size
        self._h = new()
        self._front = 0
        self._written: dict[int, int] = {}  # offset -> length of parts written at or beyond the front
        self._busy = False
        self._cond = threading.Condition()

    def written(self, offset: int, data: memoryview) -> None:
        """Record that `data` was written at `offset`; hash forward if nobody else is."""
        self._advance(offset, len(data), data)

    def kept(self, offset: int, length: int) -> None:
        """Record bytes already in the file from an earlier run (a resumed pull); hashed back from the file."""
        self._advance(offset, length, None)

    def _advance(self, offset: int, length: int, data: memoryview | None) -> None:
        with self._cond:
            self._written[offset] = length
            if self._busy:
                return
            self._busy = True
        try:
            while (part := self._next()) is not None:
                start, length = part
                if start == offset and data is not None:
                    self._h.update(data)  # this thread's own bytes, still in its buffer
                else:
                    self._hash_back(start, length)
                with self._cond:
                    self._front = start + length
        except BaseException:
            self._idle()
            raise

    def _next(self) -> tuple[int, int] | None:
        """(offset, length) of the part at the front when it is written (taking it), else None and idle.

        Finding nothing and going idle is one step under the lock: a part recorded in between
        would otherwise wait for a hasher that has already left.
        """
        with self._cond:
            length = self._written.pop(self._front, None)
            if length is None:
                self._busy = False
                self._cond.notify_all()
                return None
            return self._front, length

    def _idle(self) -> None:
        with self._cond:
            self._busy = False
            self._cond.notify_all()

    def _hash_back(self, offset: int, length: int) -> None:
        buf = getattr(_local, "hash_buf", None)
        if buf is None:
            buf = _local.hash_buf = memoryview(bytearray(CHUNK))
        end = offset + length
        while offset < end:
            n = os.preadv(self._fd, [buf[: min(CHUNK, end - offset)]], offset)
            if n <= 0:
                raise OSError(f"short read hashing back at byte {offset}")
            self._h.update(buf[:n])
            offset += n

    def hexdigest(self) -> str:
        """The digest once every part is written (waits for a worker still hashing the tail)."""
        with self._cond:
            self._cond.wait_for(lambda: not self._busy)
            if self._front != self._size or self._written:
                raise RuntimeError(f"hashed {self._front} of {self._size} bytes")  # a bug, not a user error
        return self._h.hexdigest()
