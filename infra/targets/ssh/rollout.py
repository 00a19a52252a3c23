"""Rolling changes without a chain of hosts: at most one serving engine restarts at a time, none after one failed.

Read-only work (state reads, health gates of unchanged hosts) and first starts (no engine serving on the host)
never wait here, so a no-op and a first create run on every host at once; only a host whose running engine is
about to restart takes its turn. A change that fails (its engine unhealthy, rolled back) ends the rollout; a host
that cannot be reached fails alone, as any independent Pulumi resource does. One Rollout lives per Pulumi
operation (the dynamic-provider plugin is one process per `pulumi up`); the direct driver (apply.py) orders hosts
itself and passes none.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from infra.errors import RemoteError

ROLLING = "__rolling"  # the service's input that asks for turns; "__" keeps it out of diffs and outputs


class Rollout:
    """Turns for the restarts of serving engines, in arrival order; the first failed one ends the rollout."""

    def __init__(self) -> None:
        self._turn = threading.Lock()
        self.stopped_at: str | None = None

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
        """Hold the only turn while host LABEL restarts and passes its health gate (or is rolled back)."""
        with self._turn:
            refused = self.refusal(label)
            if refused is not None:
                raise refused
            try:
                yield
            except BaseException:
                self.stop(label)
                raise


ROLLOUT = Rollout()  # this process's: the plugin serves one Pulumi operation
