"""The real Caddy (scripts/tools.sh builds v2.11) run here on a config file, for the gateway's own tests."""
from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.daemons import stop
from tests.support.realengine import TOOLS_BIN


@contextmanager
def caddy(config: Path, ready: Callable[[], bool] | None = None, timeout: float = 30) -> Iterator[subprocess.Popen]:
    """Caddy running CONFIG (its HOME beside it) until the block ends; with READY, waits until it holds."""
    proc = subprocess.Popen([str(TOOLS_BIN / "caddy"), "run", "--config", str(config)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env={**os.environ, "HOME": str(config.parent)})
    try:
        deadline = time.monotonic() + timeout
        while ready is not None and not ready():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()[-2000:]
            time.sleep(0.1)
        yield proc
    finally:
        stop(proc)
