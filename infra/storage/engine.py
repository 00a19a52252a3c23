"""The transfer engine: a bounded thread pool of part tasks, per-file completion."""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any


class Cancelled(Exception):
    """A task skipped because another one failed first."""


class Pool:
    """Runs part tasks on `workers` threads with a bounded queue; after the first error the rest are skipped."""

    def __init__(self, workers: int, lookups: int = 4):
        self._ex = ThreadPoolExecutor(workers, thread_name_prefix="inferry-xfer")
        self._lookups = ThreadPoolExecutor(lookups, thread_name_prefix="inferry-lookup")
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

    def lookup(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Run a small request (a HEAD) beside the part tasks, so its latency overlaps with moving data."""
        return self._lookups.submit(fn, *args)

    def stop(self) -> None:
        """Skip every task not yet started."""
        self.stopped.set()

    def close(self) -> None:
        """Wait for running tasks and release the threads."""
        self._lookups.shutdown(wait=True, cancel_futures=True)
        self._ex.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is not None:
            self.stop()
        self.close()


@dataclass
class FileJob:
    """One file's transfer: `done` resolves when the file is complete; each next(steps) queues one part.

    `abandon` fails a file whose parts will not all be queued (its own clean-up runs).
    """

    done: Future
    steps: Iterator[None]
    abandon: Callable[[], None]


def run_parts(pool: Pool, parts: list[tuple[Any, ...]], part_fn: Callable[..., Any],
              finish: Callable[[list[Any]], Any], on_error: Callable[[BaseException], None],
              ready: Future | None = None) -> FileJob:
    """A job running part_fn(*part) for every part (queued by `drive`); finish(results) runs once all succeed.

    With no parts at all, finish([]) runs when the job's turn comes.

    With `ready` (a lookup), no part is queued before it succeeds; its error is the job's.
    """
    done: Future = Future()
    results: list[Any] = [None] * len(parts)
    left, queued = [len(parts)], [0]
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
            complete()

    def complete() -> None:
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
        if ready is not None:
            try:
                ready.result()
            except BaseException as e:
                fail(e)
                raise
        if not parts:  # nothing left to send (a resumed upload whose parts are all stored): finish at once
            complete()
            return
        for i, part in enumerate(parts):
            if pool.stopped.is_set():
                fail(Cancelled())  # the parts already queued finish or fail on their own; the file is not complete
                return
            pool.submit(part_fn, *part).add_done_callback(lambda f, i=i: collect(i, f))
            queued[0] += 1
            yield

    def abandon() -> None:
        if queued[0] < len(parts) or not parts:  # with every part queued the file still completes on its own
            fail(Cancelled())  # (a no-op for a file already finished)

    return FileJob(done, steps(), abandon)


def drive(jobs: Iterable[FileJob], width: int = 4) -> list[Future]:
    """Queue the parts of up to `width` files round-robin, so several files (and their sha256) progress at once.

    Jobs are created lazily from the iterable, so at most `width` files are open at a time.
    The pool is FIFO and each file's parts are queued in order, which keeps hashing.OrderedHasher
    deadlock-free.
    """
    pending, active, futures = iter(jobs), [], []
    try:
        while True:
            while len(active) < width and (job := next(pending, None)) is not None:
                active.append(job)
                futures.append(job.done)
            if not active:
                return futures
            for job in list(active):
                if next(job.steps, _END) is _END:
                    active.remove(job)
    except BaseException:
        for job in active:  # files with parts never queued fail now, so they clean up after themselves
            job.abandon()
        raise


_END = object()


def ranges(size: int, part_size: int) -> list[tuple[int, int, int]]:
    """(index, offset, length) of each part of an object; one empty part for an empty object."""
    if size == 0:
        return [(0, 0, 0)]
    return [(i, off, min(part_size, size - off)) for i, off in enumerate(range(0, size, part_size))]
