"""The Pulumi CLI as a child inferry answers for: Ctrl-C passed on once, nothing left running when inferry dies.

The Automation API runs `pulumi` in inferry's process group and, on Ctrl-C, lets KeyboardInterrupt tear down its
pipes and the program's language server while the CLI runs on: the CLI then died of a broken pipe mid-update,
leaving its lock, pending operations and its provider plugin behind. Here the CLI runs in a process group of its
own, so a terminal's Ctrl-C reaches inferry alone, which passes it on: the first makes Pulumi cancel (the steps
under way finish and are recorded, the lock is released), a second makes it stop at once, as Pulumi's own
prompt says. If inferry itself is killed, the kernel kills the CLI with it (PR_SET_PDEATHSIG).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Optional

from infra.errors import Interrupted

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
PR_SET_PDEATHSIG = 1
OnLine = Optional[Callable[[str], None]]


# Set in a small exec shim, not a preexec_fn: a fork of this process (gRPC threads serve the inline program)
# runs gRPC's fork handlers, which print a warning; the shim is spawned without them (~20 ms).
SHIM = ("import ctypes, os, sys\n"
        f"ctypes.CDLL(None).prctl({PR_SET_PDEATHSIG}, {int(signal.SIGKILL)})\n"
        "if os.getppid() != int(sys.argv[1]): os._exit(137)\n"  # inferry died before the line above
        "os.execvp(sys.argv[2], sys.argv[2:])")


def _dying_with_us(cmd: list[str]) -> list[str]:
    """CMD, killed by the kernel when inferry dies (Linux; CMD as it is elsewhere)."""
    if not sys.platform.startswith("linux"):
        return cmd
    return [sys.executable, "-I", "-S", "-c", SHIM, str(os.getpid()), *cmd]


def _consume(stream, callback: OnLine, chunks: list[str]) -> None:
    for line in iter(stream.readline, ""):
        stripped = line.rstrip()
        if callback:
            callback(stripped)
        chunks.append(stripped)
    stream.close()


def run_cli(cmd: list[str], cwd: str, env: dict[str, str], on_output: OnLine = None,
            on_error: OnLine = None) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of CMD; Interrupted when a signal stopped it."""
    out: list[str] = []
    err: list[str] = []
    got: list[int] = []
    with subprocess.Popen(_dying_with_us(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env,
                          encoding="utf-8", process_group=0) as proc:
        def forward(signum: int, _frame) -> None:
            got.append(signum)
            proc.send_signal(signal.SIGINT if signum == signal.SIGHUP else signum)

        readers = [threading.Thread(target=_consume, args=a, daemon=True)
                   for a in ((proc.stdout, on_output, out), (proc.stderr, on_error, err))]
        for t in readers:
            t.start()
        previous = _install(forward)
        try:
            for t in readers:
                t.join()
            proc.wait()
        finally:
            _restore(previous)
    if got:
        raise Interrupted(f"interrupted ({signal.Signals(got[0]).name})")
    return proc.returncode, "\n".join(out), "\n".join(err)


def _install(handler) -> dict[int, object]:
    """Route the terminal's signals to HANDLER while the CLI runs (only the main thread may)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: signal.signal(s, handler) for s in FORWARDED}


def _restore(previous: dict[int, object]) -> None:
    for s, h in previous.items():
        signal.signal(s, h)
