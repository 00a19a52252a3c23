"""Enough threads in Pulumi's Python provider host for every host's step at once.

The host (`python -m pulumi.dynamic`, pulumi/dynamic/__main__.py) serves its gRPC calls from
`futures.ThreadPoolExecutor(max_workers=4)`, and each SSH step holds its call while its host works: a service
create holds it through the engine's health gate, minutes for a large model. With more than four hosts the
calls would queue and a fleet would come up in waves of four (ceil(N/4) engine starts instead of one).
`target.max_parallel` is the bound inferry means; the host's pool is raised above it once per process.

The host also ends itself when the Pulumi CLI that started it is gone: Pulumi starts plugins in a process group
of their own and kills them when it ends, so a CLI killed mid-update (SIGKILL, a closed terminal) left this
process serving no one, forever.
"""
from __future__ import annotations

import gc
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

CALLS = 512  # threads the host may grow to; idle ones cost a little memory, and each step is mostly waiting
_DONE = threading.Event()
_GUARD = threading.Lock()


def in_provider_host() -> bool:
    """Whether this process is Pulumi's Python provider host."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", "") == "pulumi.dynamic.__main__"


def serve_more_calls(calls: int = CALLS) -> int:
    """Raise the provider host's call pool to `calls` threads (once; a no-op elsewhere); returns how many pools
    were raised. concurrent.futures grows a pool on submit up to its `_max_workers`, and the calls already
    queued behind four busy threads get a thread each now."""
    if _DONE.is_set() or not in_provider_host():
        return 0
    with _GUARD:
        if _DONE.is_set():
            return 0
        pools = [pool for pool in _server_pools() if pool._max_workers < calls]
        for pool in pools:
            pool._max_workers = calls
            for _ in range(pool._work_queue.qsize()):
                pool._adjust_thread_count()
        _DONE.set()
        watch_engine()
        return len(pools)


def _parent(pid: int) -> tuple[int, str]:
    """(parent pid, command name) of PID from /proc; (0, "") when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            head, _, rest = f.read().rpartition(")")
        return int(rest.split()[1]), head.partition("(")[2]
    except (OSError, ValueError, IndexError):
        return 0, ""


def engine_pid() -> int | None:
    """The Pulumi CLI above this process (its plugin shim, a shell script, is in between), else None."""
    pid = os.getpid()
    for _ in range(3):
        pid, _ = _parent(pid)
        if pid <= 1:
            return None
        if _parent(pid)[1] == "pulumi":
            return pid
    return None


def watch_engine(every_s: float = 1.0) -> None:
    """End this process once the CLI that started it has ended (what it asked for can no longer be recorded)."""
    pid = engine_pid()
    if pid is None:
        return

    def watch() -> None:
        while _parent(pid)[1] == "pulumi":
            time.sleep(every_s)
        os._exit(1)

    threading.Thread(target=watch, name="inferry-engine-watch", daemon=True).start()


def _server_pools() -> list[ThreadPoolExecutor]:
    """The thread pool of each gRPC server in this process (the provider host runs one)."""
    from grpc._server import _Server

    found = []
    for obj in gc.get_objects():
        pool = getattr(getattr(obj, "_state", None), "thread_pool", None) if isinstance(obj, _Server) else None
        if isinstance(pool, ThreadPoolExecutor):
            found.append(pool)
    return found

