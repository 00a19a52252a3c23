"""Transfer progress: a rich bar (bytes, throughput, ETA) on a terminal, plain log lines otherwise."""
from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


class Meter:
    """Counts bytes from many threads; call it with each chunk's size (`kept` for bytes a resumed run reuses)."""

    def __init__(self, label: str, total: int, show: bool | None = None, stream: TextIO | None = None,
                 every_s: float = 5.0):
        self.label, self.total, self.done, self.resumed = label, total, 0, 0
        self.stream = stream or sys.stderr
        self.show = True if show is None else show  # None: a bar on a terminal, log lines otherwise
        self._lock = threading.Lock()
        self._start = self._last = time.monotonic()
        self._every = every_s
        self._bar = self._task = self._ticker = None
        self._stop = threading.Event()
        if self.show and self.stream.isatty() and total:
            self._start_bar()
        elif self.show and total and every_s > 0:
            # Off a terminal a line is due every every_s even when no chunk arrives: one part of a slow upload
            # or a server-side copy of a large object may take minutes.
            self._ticker = threading.Thread(target=self._tick, name=f"meter {label}", daemon=True)
            self._ticker.start()

    def _start_bar(self) -> None:
        from rich.console import Console
        from rich.progress import (BarColumn, DownloadColumn, Progress, TimeRemainingColumn,
                                   TransferSpeedColumn)

        self._bar = Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                             TransferSpeedColumn(), TimeRemainingColumn(), console=Console(file=self.stream))
        self._task = self._bar.add_task(self.label, total=self.total)
        self._bar.start()

    def __call__(self, n: int) -> None:
        with self._lock:
            self.done += n
            now = time.monotonic()
            due = self.show and self._bar is None and now - self._last >= self._every
            if due:
                self._last = now
        if self._bar is not None:
            self._bar.update(self._task, advance=n)
        elif due:
            self._line()

    def _tick(self) -> None:
        while not self._stop.wait(self._every):
            with self._lock:
                due = time.monotonic() - self._last >= self._every * 0.9  # a chunk may have just printed one
                if due:
                    self._last = time.monotonic()
            if due and not self._stop.is_set():
                self._line()

    def kept(self, n: int) -> None:
        """Bytes already at the destination from an interrupted run: they advance the bar, not the bytes moved."""
        with self._lock:
            self.resumed += n
        if self._bar is not None:
            self._bar.update(self._task, advance=n)

    def _line(self) -> None:
        secs = max(time.monotonic() - self._start, 1e-9)
        rate = self.done / secs
        there = self.done + self.resumed
        pct = 100.0 * there / self.total if self.total else 100.0
        eta = (self.total - there) / rate if rate else 0.0
        kept = f", {self.resumed / 1e6:,.1f} MB of it resumed" if self.resumed else ""
        print(f"{self.label}: {there / 1e6:,.1f}/{self.total / 1e6:,.1f} MB ({pct:.0f}%{kept}) "
              f"{rate / 1e6:,.1f} MB/s eta {eta:,.0f}s", file=self.stream, flush=True)

    def close(self) -> None:
        """Stop the bar, or print the final line."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()  # it wakes at once on the event: no line after the final one
        if self._bar is not None:
            self._bar.stop()
        elif self.show and self.total:
            self._line()
