"""The gateway's certificate renews by itself while it serves: the real Caddy (v2.11) runs the config inferry
computes, Pebble (Let's Encrypt's test CA) issues over HTTP-01 certificates that last two minutes, and a client
verifying each handshake against Pebble's root sees the certificate change with no failed request.

One setting is the test's own: Caddy looks for certificates to renew every 2 s (`renew_interval`) instead of
every 10 minutes, which a 90-day (or a 6-day) certificate never needs. Pebble's renewal window (ARI) for so short
a certificate spans its whole life, so Caddy renews at a random moment of it, and at the latest in its last 5%
(certmagic's emergency window): the lifetime leaves that last renewal seconds to spare."""
from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import time
from http.server import ThreadingHTTPServer

import pytest

from infra.gateway.caddy import GatewayPlan, GatewaySecrets, caddy_config
from tests.gateway.test_gateway_access_log import Engine
from tests.support.ports import free_ports
from tests.support.acme import start_acme
from tests.support.caddy import caddy

pytestmark = [pytest.mark.gateway, pytest.mark.acme]
DOMAIN = "llm.inferry.test"
KEY = "sk-renew-3e9a1f5c7b2d4e6f8a0b1c2d3e4f5a6b"
LIFETIME_S = 120


def _health(port: int, root: str) -> tuple[int, int]:
    """(status of GET /health, serial of the certificate the gateway served), the chain verified against ROOT
    for DOMAIN (reached at this machine's loopback address, as DNS would point it)."""
    ctx = ssl.create_default_context(cadata=root)
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    with ctx.wrap_socket(raw, server_hostname=DOMAIN) as tls:
        serial = int(_peer_serial(tls), 16)
        conn = http.client.HTTPConnection(DOMAIN, port, timeout=10)
        conn.sock = tls
        conn.request("GET", "/health")
        return conn.getresponse().status, serial


def _peer_serial(tls: ssl.SSLSocket) -> str:
    from cryptography import x509

    return format(x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number, "x")


@pytest.fixture
def gateway(tmp_path):
    """(HTTPS port, Pebble's root) of a running Caddy with a Pebble certificate, in front of a stand-in engine."""
    engine = ThreadingHTTPServer(("127.0.0.1", 0), Engine)
    threading.Thread(target=engine.serve_forever, daemon=True).start()
    http_port, https_port = free_ports(2)
    acme = start_acme(tmp_path / "acme", "127.0.0.1", "127.0.0.1", http_port=http_port, validity_s=LIFETIME_S,
                      name="localhost")
    state = tmp_path / "gw"
    plan = GatewayPlan(str(state), (f"127.0.0.1:{engine.server_port}",), ("/v1/*",), "/health", "acme",
                       domains=(DOMAIN,), https_port=https_port, http_port=http_port,
                       acme_directory=acme.directory, acme_ca_root=acme.directory_root.read_text())
    state.mkdir()
    (state / "acme-ca-root.pem").write_text(plan.acme_ca_root)
    conf = caddy_config(plan, GatewaySecrets((KEY,)))
    conf["apps"]["tls"]["automation"]["renew_interval"] = "2s"
    (state / "caddy.json").write_text(json.dumps(conf))
    try:
        with caddy(state / "caddy.json"):
            yield https_port, acme.root_pem()
    finally:
        acme.stop()
        engine.shutdown()


def test_the_certificate_renews_by_itself_and_every_request_is_served(gateway):
    port, root = gateway
    deadline = time.monotonic() + 60
    while True:  # the first certificate
        try:
            first = _health(port, root)
            break
        except (OSError, ssl.SSLError):
            assert time.monotonic() < deadline, "no certificate from Pebble within 60 s"
            time.sleep(0.5)
    seen, statuses = [first[1]], [first[0]]
    deadline = time.monotonic() + LIFETIME_S + 30
    while len(set(seen)) < 2 and time.monotonic() < deadline:
        status, serial = _health(port, root)  # a handshake with an expired certificate raises here
        statuses.append(status)
        seen.append(serial)
        time.sleep(0.5)
    assert set(statuses) == {200}
    assert len(set(seen)) >= 2, f"serials seen: {sorted(set(seen))}"  # renewed, and served across it
