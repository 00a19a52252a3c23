"""A request a replica drops before answering is sent again to another, body and all, by the real Caddy (v2.11,
scripts/tools.sh) running the config inferry computes: what a client sees while a docker host's engine restarts
in a rolling update (Docker's port proxy takes the connection of a stopped container, then closes it)."""
from __future__ import annotations

import hashlib
import json
import socket
import threading
from http.server import ThreadingHTTPServer

import pytest

from infra.gateway.caddy import GatewayPlan, GatewaySecrets, caddy_json
from tests.gateway.test_gateway_access_log import Engine, _call
from tests.support.ports import free_port
from tests.support.caddy import caddy

pytestmark = pytest.mark.gateway
KEY = "sk-retry-5c1e0b9a7d3f4e2a8b6c0d1e2f3a4b5c"


class Echo(Engine):
    """An engine that answers a POST with the sha256 of the body it received."""

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self._answer(json.dumps({"sha256": hashlib.sha256(body).hexdigest()}).encode())


class Dropper:
    """A replica going away: it passes the gateway's health checks, and closes every other connection after
    reading the request's first bytes, without a response byte (as a stopped container behind Docker's port
    proxy does)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.dropped = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                head = conn.recv(65536)
                if head.startswith(b"GET /health "):
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                else:
                    self.dropped += 1


@pytest.fixture
def gateway(tmp_path):
    """(base URL, dropper) of a running Caddy in front of one engine that answers and one that drops."""
    echo = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=echo.serve_forever, daemon=True).start()
    dropper, port = Dropper(), free_port()
    plan = GatewayPlan(str(tmp_path), (f"127.0.0.1:{dropper.port}", f"127.0.0.1:{echo.server_port}"), ("/v1/*",),
                       "/health", "off", http_port=port, balance="round_robin")
    conf = tmp_path / "caddy.json"
    conf.write_text(caddy_json(plan, GatewaySecrets((KEY,))))
    base = f"http://127.0.0.1:{port}"
    with caddy(conf, lambda: _call(base, "/health")[0] == 200):
        yield base, dropper
    echo.shutdown()
    dropper.sock.close()


def test_a_post_a_replica_drops_is_answered_by_another_with_the_body_it_was_sent(gateway):
    base, dropper = gateway
    answers = []
    for i in range(8):
        body = json.dumps({"model": "m", "prompt": f"request {i} " + "x" * (i * 40000)}).encode()
        status, text = _call(base, "/v1/completions", KEY, body)
        answers.append((status, text and json.loads(text).get("sha256") == hashlib.sha256(body).hexdigest()))
    assert answers == [(200, True)] * 8
    assert dropper.dropped >= 4  # round robin sent every other request to the replica that drops it first


def test_a_get_a_replica_drops_is_answered_by_another(gateway):
    """GET /v1/models too: Caddy retries a request its upstream received only where retry_match says so, and a
    retry_match naming POST alone made every GET a replica dropped a 502 (seen as 503s in a rolling update)."""
    base, dropper = gateway
    answers = [_call(base, "/v1/models", KEY) for _ in range(8)]
    assert [(s, json.loads(t)["data"][0]["id"]) for s, t in answers] == [(200, "m")] * 8
    assert dropper.dropped >= 4
