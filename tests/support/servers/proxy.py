"""A TCP proxy in front of a test server: counts the bytes each way and can cut everything at a byte count.

Tests use it to see what really crossed the wire, independently of inferry's own counters, and to
stop a transfer at an exact point (then, typically, SIGKILL the client).
"""
from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from urllib.parse import urlparse


class CountingProxy:
    """Forwards HOST:PORT (127.0.0.1 unless said) to the target; `up` counts client->server bytes, `down`
    server->client."""

    def __init__(self, target_url: str, host: str = "127.0.0.1"):
        u = urlparse(target_url)
        self.target = (u.hostname, u.port)
        self.up = self.down = 0
        self._limits: dict[str, int | None] = {"up": None, "down": None}
        self._then: Callable[[], None] | None = None
        self.tripped = threading.Event()
        self._lock = threading.Lock()
        self._socks: set[socket.socket] = set()
        self.host = host
        self._listener = socket.create_server((host, 0))
        self.port = self._listener.getsockname()[1]
        self._closed = False
        self._threads: list[threading.Thread] = []

    @property
    def endpoint(self) -> str:
        """The URL clients use instead of the target's."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> CountingProxy:
        """Accept connections on a background thread."""
        self._spawn(self._accept)
        return self

    def _spawn(self, target: Callable[..., None], *args) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)
        with self._lock:
            self._threads.append(t)
        t.start()

    def reset(self) -> None:
        """Zero the counters and lift a trip (new connections are forwarded again)."""
        with self._lock:
            self.up = self.down = 0
            self._limits = {"up": None, "down": None}
            self._then = None
            self.tripped.clear()

    def cut_after(self, up: int | None = None, down: int | None = None, then: Callable[[], None] | None = None) -> None:
        """Once `up` (or `down`) bytes have passed, forward nothing more, call `then` and drop every connection."""
        with self._lock:
            self._limits = {"up": up, "down": down}
            self._then = then

    def close(self) -> None:
        """Stop accepting and drop every connection, and return once none of the proxy's threads runs.

        A socket is closed only after every thread that used it has ended: a thread still about to call accept or
        send on a closed socket's descriptor number would reach whatever socket the process opened next under that
        number (the next test's listener), and forward its client to this proxy's old target."""
        self._closed = True
        _shutdown(self._listener)  # wakes the accept thread
        self._drop_all()
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(10)
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._closed:
                client.close()
                return
            if self.tripped.is_set():
                client.close()
                continue
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._socks |= {client, server}
            self._spawn(self._connection, client, server)

    def _connection(self, client: socket.socket, server: socket.socket) -> None:
        """Pump both ways; close the two sockets once both pumps have ended."""
        up = threading.Thread(target=self._pump, args=(client, server, "up"), daemon=True)
        up.start()
        self._pump(server, client, "down")
        up.join()
        with self._lock:
            self._socks -= {client, server}
        for s in (client, server):
            s.close()

    def _pump(self, src: socket.socket, dst: socket.socket, way: str) -> None:
        try:
            while data := src.recv(1 << 16):
                data, trip = self._admit(way, data)
                if data:
                    dst.sendall(data)
                if trip:
                    self._trip()
                    return
        except OSError:
            pass
        finally:  # wake the other way's pump; _connection closes the sockets
            _shutdown(src)
            _shutdown(dst)

    def _admit(self, way: str, data: bytes) -> tuple[bytes, bool]:
        """The part of `data` allowed through (and counted), and whether the limit was reached."""
        with self._lock:
            if self.tripped.is_set():
                return b"", False
            limit, count = self._limits[way], getattr(self, way)
            if limit is not None and count + len(data) >= limit:
                data = data[: max(0, limit - count)]
                self.tripped.set()
                setattr(self, way, count + len(data))
                return data, True
            setattr(self, way, count + len(data))
            return data, False

    def _trip(self) -> None:
        then = self._then
        if then is not None:
            then()
        self._drop_all()

    def _drop_all(self) -> None:
        with self._lock:
            socks = set(self._socks)
        for s in socks:
            _shutdown(s)  # the pumps wake, end, and close them

    def __enter__(self) -> CountingProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def _shutdown(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
