"""Connections kept open per host for the life of the process, so steps on one host share one SSH session."""
from __future__ import annotations

import hashlib
import threading

from infra.targets.ssh.session import Conn, Session, connect, load_key

_SESSIONS: dict[tuple, Session] = {}
_LOCKS: dict[tuple, threading.Lock] = {}
_GUARD = threading.Lock()
__all__ = ["Conn", "session", "drop", "close_all"]


def session(conn: Conn, private_key: str, step: str = "connect") -> Session:
    """An open session to the host, reusing one that is still alive."""
    ident = (conn, hashlib.sha256(private_key.encode()).hexdigest())
    with _GUARD:
        lock = _LOCKS.setdefault(ident, threading.Lock())
    with lock:
        s = _SESSIONS.get(ident)
        if s is not None and s.alive:
            return s
        if s is not None:
            s.close()
        s = connect(conn, load_key(private_key, f"host {conn.label}"), step)
        _SESSIONS[ident] = s
        return s


def drop(conn: Conn) -> None:
    """Forget (and close) every session to a host, e.g. after a failure mid-step."""
    with _GUARD:
        for ident in [i for i in _SESSIONS if i[0] == conn]:
            _SESSIONS.pop(ident).close()


def close_all() -> None:
    """Close every pooled session."""
    with _GUARD:
        for s in _SESSIONS.values():
            s.close()
        _SESSIONS.clear()
