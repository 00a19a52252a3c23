"""The suite's Pebble starts even when a port it was given is taken before it binds it (seen once in CI)."""
from __future__ import annotations

import socket

import pytest

from tests.support import acme

pytestmark = [pytest.mark.acme]


def test_a_port_taken_before_pebble_binds_it_is_picked_again(tmp_path, monkeypatch):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))  # bound, not listening: as an outgoing connection's own port holds it
    real, calls = acme.free_ports, []

    def picks(n: int, bind: str) -> list[int]:
        ports = real(n, bind)
        calls.append(ports)
        return ports[:2] + [taken.getsockname()[1]] + ports[3:] if len(calls) == 1 else ports

    monkeypatch.setattr(acme, "free_ports", picks)
    try:
        server = acme.start_acme(tmp_path, "127.0.0.1", "127.0.0.1", name="localhost")
    finally:
        taken.close()
    try:
        assert len(calls) == 2  # the first start failed on the taken port, the second started
        assert "address already in use" not in (tmp_path / "pebble.log").read_text()
        assert "BEGIN CERTIFICATE" in server.root_pem()
    finally:
        server.stop()
