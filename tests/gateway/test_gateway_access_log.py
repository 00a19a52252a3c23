"""The gateway's access log, written by the real Caddy (v2.11, scripts/tools.sh) from the config inferry computes:
per request the method, the path without its query, status, size, duration and the key's id; never a key, a
body, a header, a query string or the client's address. Caddy runs here with plain HTTP in front of a stand-in
engine (a small HTTP server standing for the GPU engine process)."""
from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from infra.gateway.caddy import GatewayPlan, GatewaySecrets, caddy_json, key_id
from tests.support.caddy import caddy
from tests.support.ports import free_port

pytestmark = pytest.mark.gateway
KEY = "sk-log-7d0c93b2e5a14f6890b1c2d3e4f5a6b7"
OLD = "sk-log-1a2b3c4d5e6f708192a3b4c5d6e7f809"
PROMPT = "the patient's record says"


class Engine(BaseHTTPRequestHandler):
    """/health and the OpenAI routes, as an engine behind the gateway answers them."""

    def do_GET(self):  # noqa: N802 - http.server's name
        self._answer(b"" if self.path == "/health" else b'{"data": [{"id": "m"}]}')

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        self._answer(b'{"choices": [{"text": "ok"}]}')

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass



@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    """(base URL, state dir) of a running Caddy in front of the stand-in engine."""
    engine = ThreadingHTTPServer(("127.0.0.1", 0), Engine)
    threading.Thread(target=engine.serve_forever, daemon=True).start()
    state, port = tmp_path_factory.mktemp("gw"), free_port()
    plan = GatewayPlan(str(state), (f"127.0.0.1:{engine.server_port}",), ("/v1/*",), "/health", "off",
                       http_port=port, access_log_days=7)
    conf = state / "caddy.json"
    conf.write_text(caddy_json(plan, GatewaySecrets((KEY, OLD))))
    base = f"http://127.0.0.1:{port}"
    with caddy(conf, lambda: _call(base, "/health")[0] == 200):
        yield base, state
    engine.shutdown()


def _call(base: str, path: str, key: str | None = None, body: bytes | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(base + path, data=body, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError:
        return 0, b""


def _entries(state, n: int) -> list[dict]:
    """The access log's lines, once it holds n (Caddy writes each when its request ends)."""
    deadline = time.monotonic() + 10
    while True:
        log = state / "access.log"
        lines = log.read_text().splitlines() if log.exists() else []
        if len(lines) >= n or time.monotonic() > deadline:
            return [json.loads(line) for line in lines]
        time.sleep(0.1)


def test_each_request_is_logged_without_its_key_query_headers_or_body(gateway):
    base, state = gateway
    before = len(_entries(state, 0))
    assert _call(base, "/v1/models?user=alice&token=s3cr3t", KEY)[0] == 200
    assert _call(base, "/v1/completions", OLD, json.dumps({"prompt": PROMPT}).encode())[0] == 200
    assert _call(base, "/v1/models")[0] == 401
    assert _call(base, "/metrics", KEY)[0] == 404
    got = _entries(state, before + 4)[before:]
    assert [(e["request"]["method"], e["request"]["uri"], e["status"]) for e in got] == [
        ("GET", "/v1/models", 200), ("POST", "/v1/completions", 200), ("GET", "/v1/models", 401),
        ("GET", "/metrics", 404)]
    assert [e.get("key_id") for e in got] == [key_id(KEY), key_id(OLD), None, None]
    assert all(isinstance(e["duration"], float) and e["size"] >= 0 for e in got)
    assert not {"headers", "remote_ip", "client_ip", "remote_port", "tls"} & {k for e in got for k in e["request"]}
    text = (state / "access.log").read_text()
    for secret in (KEY, OLD, "s3cr3t", "alice", PROMPT, "Bearer"):
        assert secret not in text, secret
    assert oct((state / "access.log").stat().st_mode & 0o777) == "0o600"
