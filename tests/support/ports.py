"""Free TCP ports for servers a test starts."""
from __future__ import annotations

import socket


def free_ports(n: int, bind: str = "127.0.0.1") -> list[int]:
    """N distinct ports free on BIND now (held open together while picked, so no two are the same)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind((bind, 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port(bind: str = "127.0.0.1") -> int:
    """One port free on BIND now."""
    return free_ports(1, bind)[0]
