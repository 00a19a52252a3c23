"""The transfer engine: a bounded thread pool of part tasks, per-file completion, in-order hashing."""
from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any


class Cancelled(Exception):
    """A task skipped because another one failed first."""


class OrderedHasher:
    """sha256 of parts that arrive out of order.

    The part whose turn it is gets hashed at once; a part that arrives early is copied aside
    (at most `ahead` of them, beyond that its thread waits), so workers rarely block. Parts are
    queued in order on a FIFO pool, so the part being waited for is always running: no deadlock.
    Memory of a streamed copy: at most (workers + width x ahead) parts.
    """

    def __init__(self, ahead: int = 2) -> None:
        self._h = hashlib.sha256()
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

    def hexdigest(self) -> str:
        """The digest of everything fed."""
        return self._h.hexdigest()


class Pool:
    """Runs part tasks on `workers` threads with a bounded queue; after the first error the rest are skipped."""

    def __init__(self, workers: int):
        self._ex = ThreadPoolExecutor(workers, thread_name_prefix="inferry-xfer")
        self._slots = threading.BoundedSemaphore(workers * 2)
        self.stopped = threading.Event()
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Queue one task (blocks while the queue is full)."""
        self._slots.acquire()
        try:
            return self._ex.submit(self._run, fn, *args)
        except BaseException:
            self._slots.release()
            raise

    def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            if self.stopped.is_set():
                raise Cancelled()
            return fn(*args)
        except Cancelled:
            raise
        except BaseException as e:
            with self._lock:
                self.errors.append(e)
            self.stopped.set()
            raise
        finally:
            self._slots.release()

    def stop(self) -> None:
        """Skip every task not yet started."""
        self.stopped.set()

    def close(self) -> None:
        """Wait for running tasks and release the threads."""
        self._ex.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is not None:
            self.stop()
        self.close()


@dataclass
class FileJob:
    """One file's transfer: `done` resolves when the file is complete; each next(steps) queues one part."""

    done: Future
    steps: Iterator[None]


def run_parts(pool: Pool, parts: list[tuple[Any, ...]], part_fn: Callable[..., Any],
              finish: Callable[[list[Any]], Any], on_error: Callable[[BaseException], None]) -> FileJob:
    """A job running part_fn(*part) for every part (queued by `drive`); finish(results) runs once all succeed."""
    done: Future = Future()
    results: list[Any] = [None] * len(parts)
    left = [len(parts)]
    lock = threading.Lock()

    def fail(err: BaseException) -> None:
        with lock:
            first = not done.done()
            if first:
                done.set_exception(err)
        if first:
            on_error(err)

    def collect(i: int, fut: Future) -> None:
        err = Cancelled() if fut.cancelled() else fut.exception()
        if err is not None:
            fail(err)
            return
        with lock:
            results[i] = fut.result()
            left[0] -= 1
            last = left[0] == 0
        if last:
            try:
                value = finish(results)
            except BaseException as e:  # noqa: BLE001 - reported through the file's future
                pool.errors.append(e)
                pool.stop()
                fail(e)
                return
            with lock:
                done.set_result(value)

    def steps() -> Iterator[None]:
        for i, part in enumerate(parts):
            if pool.stopped.is_set():
                fail(Cancelled())  # the parts already queued finish or fail on their own; the file is not complete
                return
            pool.submit(part_fn, *part).add_done_callback(lambda f, i=i: collect(i, f))
            yield

    return FileJob(done, steps())


def drive(jobs: Iterable[FileJob], width: int = 4) -> list[Future]:
    """Queue the parts of up to `width` files round-robin, so several files (and their sha256) progress at once.

    Jobs are created lazily from the iterable, so at most `width` files are open at a time.
    The pool is FIFO and each file's parts are queued in order, which keeps OrderedHasher deadlock-free.
    """
    pending, active, futures = iter(jobs), [], []
    while True:
        while len(active) < width and (job := next(pending, None)) is not None:
            active.append(job)
            futures.append(job.done)
        if not active:
            return futures
        for job in list(active):
            if next(job.steps, _END) is _END:
                active.remove(job)


_END = object()


def ranges(size: int, part_size: int) -> list[tuple[int, int, int]]:
    """(index, offset, length) of each part of an object; one empty part for an empty object."""
    if size == 0:
        return [(0, 0, 0)]
    return [(i, off, min(part_size, size - off)) for i, off in enumerate(range(0, size, part_size))]
