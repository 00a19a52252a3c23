"""Rolling changes without a chain of hosts: at most `width` serving engines restart at once (target.max_unavailable,
one by default), none after one failed.

Read-only work (state reads, health gates of unchanged hosts) and first starts (no engine serving on the host)
never wait here, so a no-op and a first create run on every host at once; only a host whose running engine is
about to restart takes its turn. A change that fails (its engine unhealthy, rolled back) ends the rollout; a host
that cannot be reached, or whose connection is lost in its turn, fails alone, as any independent Pulumi resource does. One Rollout lives per Pulumi
operation (the dynamic-provider plugin is one process per `pulumi up`); the direct driver (apply.py) orders hosts
itself and passes none.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from infra.errors import RemoteError, Unreachable

ROLLING = "__rolling"  # the service's input that asks for turns; "__" keeps it out of diffs and outputs


class Rollout:
    """Turns for the restarts of serving engines, in arrival order, `width` at once; the first failed one ends
    the rollout (changes already under way finish, each healthy or rolled back; no engine restarts after)."""

    def __init__(self, width: int = 1) -> None:
        self._free = threading.Condition()
        self._width, self._busy = max(1, width), 0
        self.stopped_at: str | None = None

    def width(self, n: int) -> "Rollout":
        """This rollout with n turns at once (one stack per process: every host of it asks for the same n)."""
        with self._free:
            self._width = max(1, n)
            self._free.notify_all()
        return self

    def stop(self, label: str) -> None:
        """The change on host LABEL failed: no serving engine restarts after this."""
        if self.stopped_at is None:
            self.stopped_at = label

    def refusal(self, label: str) -> RemoteError | None:
        """The error for host LABEL once the rollout stopped, else None."""
        if self.stopped_at is None:
            return None
        return RemoteError(f"engine not changed: the rolling update stopped at host {self.stopped_at}",
                           f"fix host {self.stopped_at} and apply again", where=f"host {label}")

    @contextmanager
    def turn(self, label: str) -> Iterator[None]:
        """Hold one of the turns while host LABEL restarts and passes its health gate (or is rolled back)."""
        with self._free:
            self._free.wait_for(lambda: self._busy < self._width)
            self._busy += 1
        try:
            refused = self.refusal(label)
            if refused is not None:
                raise refused
            try:
                yield
            except Unreachable:
                raise  # the host is lost, not the change wrong: the others go on (docs/ssh.md)
            except BaseException:
                self.stop(label)
                raise
        finally:
            with self._free:
                self._busy -= 1
                self._free.notify()


ROLLOUT = Rollout()  # this process's: the plugin serves one Pulumi operation
