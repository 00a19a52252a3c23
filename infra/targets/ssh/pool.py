"""Connections kept open per host for the life of the process, so steps on one host share one SSH session."""
from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass

from infra.targets.ssh.hostkeys import HostKeyPolicy
from infra.targets.ssh.session import Endpoint, Session, connect, load_key

_SESSIONS: dict[tuple, Session] = {}
_LOCKS: dict[tuple, threading.Lock] = {}
_GUARD = threading.Lock()


@dataclass(frozen=True)
class Conn:
    """A host's connection settings as provider inputs carry them (the private key travels separately, secret)."""

    address: str
    port: int = 22
    user: str = "root"
    name: str = ""
    host_key: str | None = None
    known_hosts: str | None = None
    trust_on_first_use: bool = False

    @classmethod
    def from_dict(cls, d: dict) -> "Conn":
        """From provider inputs (numbers may arrive as floats)."""
        return cls(str(d["address"]), int(d.get("port", 22)), str(d.get("user", "root")), str(d.get("name") or ""),
                   d.get("host_key") or None, d.get("known_hosts") or None, bool(d.get("trust_on_first_use", False)))

    def to_dict(self) -> dict:
        """For provider inputs."""
        return {"address": self.address, "port": self.port, "user": self.user, "name": self.name,
                "host_key": self.host_key, "known_hosts": self.known_hosts,
                "trust_on_first_use": self.trust_on_first_use}

    @property
    def endpoint(self) -> Endpoint:
        """The session layer's view."""
        return Endpoint(self.address, self.port, self.user, self.name,
                        HostKeyPolicy(self.host_key, self.known_hosts, self.trust_on_first_use))

    @property
    def label(self) -> str:
        """The host as messages name it."""
        return self.name or self.address


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
        s = connect(conn.endpoint, load_key(private_key, f"host {conn.label}"), step)
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
