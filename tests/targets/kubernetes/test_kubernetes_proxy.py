"""The auth-proxy sidecar's nginx template, run for real: no key or a wrong key gets 401, health stays open."""
from __future__ import annotations

import http.server
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from infra.targets.kubernetes.weights import TEMPLATES
from tests.support.ports import free_port

KEY = "sk-test-0123456789abcdef"



class _Engine(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's naming)
        body = b'{"path": "%s"}' % self.path.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    """nginx with the rendered template (envsubst of the three variables, as the nginx image does)."""
    tmp = tmp_path_factory.mktemp("proxy")
    engine = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Engine)
    threading.Thread(target=engine.serve_forever, daemon=True).start()
    port = free_port()
    env = {"INFERRY_API_KEY": KEY, "INFERRY_PORT": f"127.0.0.1:{port}",
           "INFERRY_ENGINE_PORT": str(engine.server_address[1]), "INFERRY_HEALTH_PATH": "/health",
           "INFERRY_METRICS_PATH": "/metrics"}
    text = (TEMPLATES / "auth-proxy.conf.template").read_text()
    conf = subprocess.run(["envsubst", " ".join(f"${k}" for k in env)], input=text, env=env,
                          capture_output=True, text=True, check=True).stdout
    (tmp / "proxy.conf").write_text(conf)
    temps = " ".join(f"{k}_temp_path {tmp}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    (tmp / "nginx.conf").write_text(f"daemon off; master_process off; pid {tmp}/nginx.pid; error_log stderr;\n"
                                    f"events {{}}\nhttp {{ access_log off; {temps} include {tmp}/proxy.conf; }}\n")
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    proc = subprocess.Popen([nginx, "-p", str(tmp), "-c", str(tmp / "nginx.conf")], stderr=subprocess.PIPE)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)
    engine.shutdown()


def _get(url: str, key: str | None = None) -> int:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_requests_need_the_key(proxy):
    assert _get(f"{proxy}/v1/models") == 401
    assert _get(f"{proxy}/v1/models", "wrong") == 401
    assert _get(f"{proxy}/v1/models", KEY) == 200


def test_health_and_metrics_stay_open_for_probes_and_prometheus(proxy):
    assert _get(f"{proxy}/health") == 200 and _get(f"{proxy}/metrics") == 200
