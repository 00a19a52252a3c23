"""Start the stand-in engine as a local process (tests that need an engine but no SSH host)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
ENGINE = Path(__file__).with_name("engine.py")


def command(program: str, *args: str) -> list[str]:
    """argv that runs the stand-in as PROGRAM ('vllm' or 'trtllm-serve') with the engine's own args."""
    return [sys.executable, str(ENGINE), program, *args]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free right now on host."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass
class RunningEngine:
    """A started stand-in engine: its process, URL and log file."""

    proc: subprocess.Popen
    base_url: str
    log_path: Path

    @property
    def log(self) -> str:
        """Everything it printed so far."""
        return self.log_path.read_text()

    def health(self, timeout: float = 5) -> int:
        """HTTP status of /health (0 when nothing answers in time)."""
        try:
            with urllib.request.urlopen(f"{self.base_url}/health", timeout=timeout) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return 0

    def wait(self, status: int = 200, timeout: float = 30) -> None:
        """Wait until /health answers status; raise with the log if the process dies first."""
        deadline = time.monotonic() + timeout
        while self.health() != status:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"stand-in engine not at /health {status}; log:\n{self.log}")
            time.sleep(0.02)

    def stop(self) -> None:
        """SIGTERM it and wait."""
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def start_engine(args: list[str], log_path: Path, program: str = "vllm", env: dict | None = None,
                 wait_status: int | None = 200) -> RunningEngine:
    """Run `PROGRAM ARGS` (e.g. ['serve', model_dir, '--port', '8123']) and wait for /health."""
    host, port = "127.0.0.1", 8000
    for flag, value in zip(args, args[1:]):
        host = value if flag == "--host" else host
        port = int(value) if flag == "--port" else port
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(command(program, *args), stdout=log, stderr=subprocess.STDOUT, env=full_env)
    engine = RunningEngine(proc, f"http://{'127.0.0.1' if host == '0.0.0.0' else host}:{port}", log_path)
    if wait_status is not None:
        engine.wait(wait_status)
    return engine
