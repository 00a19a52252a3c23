"""Helpers for the servers the suite starts beside the cluster (KEDA, its adapter, Prometheus): wait until one
answers, stop it."""
from __future__ import annotations

import subprocess
import time
import urllib.request
from pathlib import Path


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 20 s; reaped either way."""
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_http(url: str, proc: subprocess.Popen, log: Path, what: str, timeout: float = 60) -> None:
    """Until GET url answers 200; the server's log tail if it exits or the time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, f"{what} exited {proc.returncode}:\n{log.read_text()[-3000:]}"
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, f"{what} not ready in {timeout:.0f} s:\n{log.read_text()[-3000:]}"
        time.sleep(0.2)
