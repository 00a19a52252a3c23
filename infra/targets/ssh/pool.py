"""Connections kept open per host for the life of the process, so steps on one host share one SSH session."""
from __future__ import annotations

import hashlib
import threading
from typing import Callable, TypeVar

from infra.errors import ConnectionLost
from infra.targets.ssh.session import Conn, Session, connect, load_key

T = TypeVar("T")

_SESSIONS: dict[tuple, Session] = {}
_LOCKS: dict[tuple, threading.Lock] = {}
_GUARD = threading.Lock()
__all__ = ["Conn", "session", "read", "drop", "close_all"]


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


def read(conn: Conn, private_key: str, fn: Callable[[Session], T]) -> T:
    """fn on the host's session, where fn only reads (`refresh`, status); when the connection drops under it, fn
    once more on a new one. A dropped connection says nothing of the host's state, and asking again changes
    nothing; a step that changes the host is never repeated this way (its error says to apply again)."""
    try:
        return fn(session(conn, private_key))
    except ConnectionLost:
        return fn(session(conn, private_key))  # the dead session is replaced: session() reconnects


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
