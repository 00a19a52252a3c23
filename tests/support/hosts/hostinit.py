"""Process 1 of a test host's PID namespace: private mounts, hostname, sshd, then reap orphans."""
# Runs under `unshare --pid --fork --mount-proc` inside the host's network namespace; stdlib only.
from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time

MS_BIND = 4096
_libc = ctypes.CDLL(None, use_errno=True)


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def setup(spec: dict) -> None:
    """Make the host's own view of the filesystem: overlays, private dirs, weights tmpfs."""
    for path, upper, work in spec["overlays"]:
        _mount("-t", "overlay", "overlay", "-o", f"lowerdir={path},upperdir={upper},workdir={work}", path)
    for source, target in spec["binds"]:
        os.makedirs(target, exist_ok=True)
        _mount("--bind", source, target)
    for source, path, fstype, options in spec.get("cgroups", []):  # for dockerd (tests/support/hosts/docker.py)
        os.makedirs(path, exist_ok=True)
        _mount("-t", fstype, "-o", options, source, path)
    private_run(spec["keep_in_run"])
    _mount("-t", "tmpfs", "-o", "mode=1777,size=256m", "tmpfs", "/dev/shm")
    weights = spec["weights_path"]
    os.makedirs(weights, exist_ok=True)
    if spec["weights_size"]:
        _mount("-t", "tmpfs", "-o", f"size={spec['weights_size']},mode=0755", "tmpfs", weights)
    socket.sethostname(spec["hostname"])


def private_run(keep: list[str]) -> None:
    """A fresh /run (pid files, sockets) that still shows the folders in keep (sshd config, tools)."""
    fds = [os.open(path, os.O_PATH | os.O_DIRECTORY) for path in keep]
    _mount("-t", "tmpfs", "-o", "mode=0755,size=64m", "tmpfs", "/run")
    for path, fd in zip(keep, fds):
        os.makedirs(path, exist_ok=True)
        # The original folder is hidden by the new /run now; an open descriptor still reaches it. mount(8)
        # would canonicalise /proc/self/fd/N back to the hidden path, so call mount(2) directly.
        if _libc.mount(f"/proc/self/fd/{fd}".encode(), path.encode(), None, MS_BIND, None) != 0:
            raise OSError(ctypes.get_errno(), f"bind {path}: {os.strerror(ctypes.get_errno())}")
        os.close(fd)
    os.makedirs("/run/sshd", mode=0o755)  # sshd's privilege-separation folder
    os.makedirs("/run/lock", mode=0o1777)


def reap_forever(ready_path: str) -> None:
    """Reap every orphan of the namespace until told to stop (SIGTERM ends the whole host)."""
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    with open(ready_path, "w") as f:
        f.write("ready\n")
    while True:
        try:
            os.wait()
        except ChildProcessError:
            time.sleep(0.2)


def main() -> None:
    """Read the host spec (JSON path in argv[1]), set up, start sshd, reap."""
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    setup(spec)
    subprocess.run(spec["sshd"], check=True)
    reap_forever(spec["ready"])


if __name__ == "__main__":
    main()
