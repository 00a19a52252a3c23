"""Hashing parts that arrive out of order, the shared fd of a file's parts, and the manifest's two digests."""
from __future__ import annotations

import hashlib
import os
import random
import tempfile
import threading

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.storage.engine import Cancelled
from infra.storage.hashing import OrderedHasher, WrittenHasher, check_for
from infra.storage.local import HashCache, SharedFd
from infra.storage.manifest import FileEntry, Manifest


def _write_in_order(data: bytes, part: int, order: list[int], new=hashlib.sha256) -> str:
    """Write `data` part by part in `order` through a WrittenHasher; its digest."""
    offsets = list(range(0, len(data), part)) or [0]
    with tempfile.TemporaryFile() as f:
        fd = f.fileno()
        os.ftruncate(fd, len(data))
        h = WrittenHasher(fd, len(data), new)
        for i in order:
            at = offsets[i % len(offsets)]
            chunk = memoryview(data)[at:at + part]
            os.pwrite(fd, chunk, at)
            h.written(at, chunk)
        return h.hexdigest()


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=3000), st.integers(1, 700), st.randoms(use_true_random=False))
def test_written_hasher_equals_the_sequential_digest_whatever_the_write_order(data, part, rnd):
    order = list(range(max(1, -(-len(data) // part))))
    rnd.shuffle(order)
    assert _write_in_order(data, part, order) == hashlib.sha256(data).hexdigest()
    assert _write_in_order(data, part, order, xxhash.xxh3_128) == xxhash.xxh3_128(data).hexdigest()


def test_written_hasher_from_many_threads():
    data = os.urandom(3 << 20)
    part = 64 << 10
    offsets = list(range(0, len(data), part))
    random.Random(7).shuffle(offsets)
    with tempfile.TemporaryFile() as f:
        fd = f.fileno()
        os.ftruncate(fd, len(data))
        h = WrittenHasher(fd, len(data))
        lock = threading.Lock()

        def worker() -> None:
            while True:
                with lock:
                    if not offsets:
                        return
                    at = offsets.pop()
                chunk = memoryview(data)[at:at + part]
                os.pwrite(fd, chunk, at)
                h.written(at, chunk)

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert h.hexdigest() == hashlib.sha256(data).hexdigest()


def test_a_part_written_just_as_the_hasher_finds_nothing_more_is_still_hashed():
    """The race window made certain: another thread records the next part right after the hasher found none."""
    data = b"x" * 100 + b"y" * 100
    with tempfile.TemporaryFile() as f:
        fd = f.fileno()
        os.pwrite(fd, data, 0)
        h = WrittenHasher(fd, len(data))
        found_nothing = h._next

        def then_another_part_arrives():
            got = found_nothing()
            if got is None and h._next is then_another_part_arrives:
                h._next = found_nothing
                late = threading.Thread(target=h.written, args=(100, memoryview(data)[100:]))
                late.start()
                late.join(10)
            return got

        h._next = then_another_part_arrives
        h.written(0, memoryview(data)[:100])
        assert h.hexdigest() == hashlib.sha256(data).hexdigest()


def test_hexdigest_waits_for_the_worker_still_hashing():
    """The last part's writer may return while another worker still hashes: the digest must wait for it."""
    go, hashing = threading.Event(), threading.Event()

    class Gated:
        def __init__(self) -> None:
            self.h = hashlib.sha256()

        def update(self, b) -> None:
            hashing.set()
            go.wait(30)
            self.h.update(b)

        def hexdigest(self) -> str:
            return self.h.hexdigest()

    data = b"a" * 100 + b"b" * 100
    with tempfile.TemporaryFile() as f:
        fd = f.fileno()
        os.pwrite(fd, data, 0)
        h = WrittenHasher(fd, len(data), Gated)
        first = threading.Thread(target=h.written, args=(0, memoryview(data)[:100]))
        first.start()
        assert hashing.wait(30)
        h.written(100, memoryview(data)[100:])  # recorded only: the first writer is hashing
        got: list[str] = []
        waiter = threading.Thread(target=lambda: got.append(h.hexdigest()))
        waiter.start()
        waiter.join(0.2)
        alive = waiter.is_alive() and not got
        go.set()
        assert alive, "hexdigest returned while a part was still being hashed"
        waiter.join(30)
        first.join(30)
    assert got == [hashlib.sha256(data).hexdigest()]


@pytest.mark.parametrize("new", [hashlib.sha256, xxhash.xxh3_128])
def test_ordered_hasher_equals_the_sequential_digest_whatever_the_arrival_order(new):
    parts = [bytes([i]) * 1000 for i in range(8)]
    h = OrderedHasher(new=new)
    threads = [threading.Thread(target=h.feed, args=(i, p)) for i, p in reversed(list(enumerate(parts)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert h.hexdigest() == new(b"".join(parts)).hexdigest()


def test_shared_fd_closes_only_after_the_last_user(tmp_path):
    fd = SharedFd(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    with fd.use() as n:
        fd.release()
        os.pwrite(n, b"late part", 0)  # still open: the part that was running finishes its write
    with pytest.raises(OSError):
        os.fstat(fd.fd)  # closed once that part was done
    with pytest.raises(Cancelled):
        with fd.use():
            pass
    fd.release()  # twice is fine
    assert (tmp_path / "f").read_bytes() == b"late part"


def test_manifest_keeps_old_entries_without_xxh3_and_checks_them_with_sha256():
    old = '{"version": 1, "files": [{"path": "a.safetensors", "size": 3, "sha256": "%s"}], "total": 3}' % ("ab" * 32)
    m = Manifest.from_json(old)
    assert m.files[0].xxh3_128 == "" and '"xxh3_128"' not in m.to_json()
    assert check_for(m.files[0]).name == "sha256" and check_for(m.files[0]).want == "ab" * 32
    new = FileEntry("a.safetensors", 3, "ab" * 32, "cd" * 16)
    assert Manifest.from_json(Manifest((new,), "x").to_json()).files == (new,)
    assert check_for(new).name == "xxh3-128" and check_for(new).want == "cd" * 16


def test_hash_cache_recomputes_entries_written_before_xxh3(tmp_path):
    (tmp_path / "w.safetensors").write_bytes(b"weights")
    st_ = (tmp_path / "w.safetensors").stat()
    cache = HashCache(tmp_path)
    cache.entries["w.safetensors"] = [st_.st_size, st_.st_mtime_ns, st_.st_ino, "stale-sha"]  # the old format
    e = cache.entry("w.safetensors", st_)
    assert e.sha256 == hashlib.sha256(b"weights").hexdigest()
    assert e.xxh3_128 == xxhash.xxh3_128(b"weights").hexdigest()
