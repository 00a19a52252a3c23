"""Off a terminal, a long transfer prints a progress line every few seconds even while no chunk completes."""
from __future__ import annotations

import threading

from infra.storage.progress import Meter
from infra.storage.settings import MiB


class Lines:
    """A non-terminal stream that records each line and wakes a waiter."""

    def __init__(self):
        self.lines: list[str] = []
        self.changed = threading.Condition()

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        with self.changed:
            self.lines += [line for line in text.splitlines() if line]
            self.changed.notify_all()
        return len(text)

    def flush(self) -> None:
        pass

    def wait_for(self, n: int, timeout: float = 30.0) -> list[str]:
        with self.changed:
            self.changed.wait_for(lambda: len(self.lines) >= n, timeout)
            return list(self.lines)


def test_lines_keep_coming_while_a_part_is_in_flight_and_stop_at_close():
    stream = Lines()
    meter = Meter("push big", 64 * MiB, stream=stream, every_s=0.05)
    meter(8 * MiB)  # one part done; the next is "in flight": no more calls
    lines = stream.wait_for(3)
    assert len(lines) >= 3 and all(line.startswith("push big: 8.4/67.1 MB (12%)") for line in lines[:3])
    meter.close()
    assert not meter._ticker.is_alive()  # stopped: no line can follow the final one
    assert "push big: 8.4/67.1 MB" in stream.lines[-1]


def test_no_ticker_when_hidden_or_on_a_terminal():
    before = threading.active_count()
    quiet = Lines()
    meter = Meter("x", 10 * MiB, show=False, stream=quiet, every_s=0.01)
    assert threading.active_count() == before
    meter.close()
    assert quiet.lines == []
