"""Per-key and per-address limits at the edge, enforced by the real Caddy (inferry's build: caddy/, with its
limits module) running the config inferry computes, in front of a stand-in engine that counts what reaches it.
Past a client's limit: 429 with Retry-After and an OpenAI-style error; past the whole gateway's bound: 503."""
from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from infra.gateway.caddy import GatewayPlan, GatewaySecrets, caddy_json
from tests.gateway.test_gateway_access_log import Engine
from tests.support.ports import free_port
from tests.support.caddy import caddy
from tests.support.realengine import TOOLS_BIN

pytestmark = pytest.mark.gateway
KEY = "sk-limit-3f9a0c1d2e4b5a6978c0d1e2f3a4b5c6"
OTHER = "sk-limit-9e8d7c6b5a4f30211f2e3d4c5b6a7980"
NEW = "sk-limit-0a1b2c3d4e5f60718293a4b5c6d7e8f9"


class Counting(Engine):
    """The stand-in engine; POSTs sleep `delay` seconds and are counted per key the gateway let through."""

    delay = 0.0
    seen = 0
    lock = threading.Lock()

    def do_POST(self):  # noqa: N802 - http.server's name
        with Counting.lock:
            Counting.seen += 1
        time.sleep(Counting.delay)
        super().do_POST()


@pytest.fixture
def engine():
    Counting.delay, Counting.seen = 0.0, 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def _plan(tmp_path, engine, **limits) -> GatewayPlan:
    return GatewayPlan(str(tmp_path), (f"127.0.0.1:{engine.server_port}",), ("/v1/*",), "/health", "off",
                       http_port=free_port(), hold_s=2, retry_after_s=9, **limits)


def _run(plan: GatewayPlan, keys=(KEY, OTHER)):
    conf = Path(plan.state_dir) / "caddy.json"
    conf.write_text(caddy_json(plan, GatewaySecrets(keys)))
    return caddy(conf, lambda: _post(plan, None)[0] in (401, 429))


def _post(plan: GatewayPlan, key: str | None, forwarded_for: str = "") -> tuple[int, dict, dict]:
    """(status, headers, JSON body) of one chat request through the gateway (from a proxy that says the request
    came from `forwarded_for`, when given)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    if forwarded_for:
        headers["X-Forwarded-For"] = forwarded_for
    req = urllib.request.Request(f"http://127.0.0.1:{plan.port}/v1/chat/completions",
                                 data=json.dumps({"model": "m", "messages": []}).encode(), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            status, headers, body = r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        status, headers, body = e.code, e.headers, e.read()
    except OSError:
        return 0, {}, {}
    return status, {k.lower(): v for k, v in headers.items()}, json.loads(body) if body else {}


def test_past_a_keys_rate_it_gets_429_with_retry_after_and_another_key_is_served(tmp_path, engine):
    plan = _plan(tmp_path, engine, key_per_minute=60)  # a burst of 10, then one a second
    with _run(plan):
        Counting.seen = 0
        got = [_post(plan, KEY) for _ in range(12)]
        assert [s for s, _, _ in got[:10]] == [200] * 10
        status, headers, body = got[10]
        assert status == 429 and 1 <= int(headers["retry-after"]) <= 2
        assert body["error"]["type"] == "rate_limit_exceeded" and "API key" in body["error"]["message"]
        assert _post(plan, OTHER)[0] == 200
        assert Counting.seen == 11  # what the engine received: ten of KEY's, one of OTHER's; no refused one
        time.sleep(int(headers["retry-after"]))
        assert _post(plan, KEY)[0] == 200  # the wait it named was enough


def test_a_keys_requests_in_flight_are_bounded_and_the_next_is_refused_at_once(tmp_path, engine):
    plan = _plan(tmp_path, engine, key_in_flight=2)
    with _run(plan):
        Counting.delay, Counting.seen = 1.5, 0
        with ThreadPoolExecutor(3) as pool:
            slow = [pool.submit(_post, plan, KEY) for _ in range(2)]
            time.sleep(0.5)
            t0 = time.monotonic()
            third = _post(plan, KEY)
            refused_in = time.monotonic() - t0
            assert third[0] == 429 and third[1]["retry-after"] == "1"
            assert refused_in < 1.0  # not queued behind the two: refused before they end
            assert [f.result()[0] for f in slow] == [200, 200]
        assert Counting.seen == 2
        assert _post(plan, KEY)[0] == 200  # the two ended: room again


def test_an_address_without_a_key_is_limited_too(tmp_path, engine):
    plan = _plan(tmp_path, engine, address_per_minute=6)  # a burst of 1, then one each 10 s
    with _run(plan):
        time.sleep(10)  # the readiness probe's request spent this address's token: let it come back
        got = [_post(plan, None) for _ in range(3)]
        assert [s for s, _, _ in got] == [401, 429, 429] and 9 <= int(got[1][1]["retry-after"]) <= 10
        assert _post(plan, KEY)[0] == 429  # the address is out of tokens, whatever key it shows
        assert Counting.seen == 0


def test_behind_a_proxy_a_forged_forwarded_for_still_counts_against_the_real_address(tmp_path, engine):
    """The Ingress appends the address it saw to the client's X-Forwarded-For: whatever the client wrote left of
    it is its own say, and a fresh forged value each request must not buy a fresh bucket."""
    plan = replace(_plan(tmp_path, engine, address_per_minute=6), behind_proxy=True)  # a burst of 1
    with _run(plan):
        first, *forged = [_post(plan, KEY, f"198.51.100.{n}, 203.0.113.9")[0] for n in range(1, 5)]
        assert first == 200 and forged == [429, 429, 429]
        assert _post(plan, KEY, "203.0.113.10")[0] == 200  # another client behind the same proxy is served
        assert Counting.seen == 2


def test_an_ipv6_client_is_counted_by_its_64(tmp_path, engine):
    """A host is routinely given a whole /64: each of its addresses must not be a fresh bucket."""
    plan = replace(_plan(tmp_path, engine, address_per_minute=6), behind_proxy=True)
    with _run(plan):
        assert _post(plan, KEY, "2001:db8:1:2::1")[0] == 200
        assert _post(plan, KEY, "2001:db8:1:2::beef")[0] == 429
        assert _post(plan, KEY, "2001:db8:1:3::1")[0] == 200


def test_past_the_gateways_bound_it_answers_503_with_its_retry_after(tmp_path, engine):
    plan = _plan(tmp_path, engine, max_in_flight=2)
    with _run(plan):
        Counting.delay = 1.5
        with ThreadPoolExecutor(3) as pool:
            slow = [pool.submit(_post, plan, k) for k in (KEY, OTHER)]
            time.sleep(0.5)
            status, headers, body = _post(plan, KEY)
            assert status == 503 and headers["retry-after"] == "9"
            assert body["error"]["type"] == "service_unavailable"
            assert [f.result()[0] for f in slow] == [200, 200]


def test_a_key_rotation_keeps_the_counts_and_adds_the_new_key_without_a_restart(tmp_path, engine):
    plan = _plan(tmp_path, engine, key_per_minute=60)
    with _run(plan) as proc:
        assert [_post(plan, KEY)[0] for _ in range(11)][-1] == 429
        conf = plan.state_dir + "/caddy.json"
        with open(conf, "w") as fh:
            fh.write(caddy_json(plan, GatewaySecrets((NEW, KEY))))
        subprocess.run([str(TOOLS_BIN / "caddy"), "reload", "--config", conf, "--address",
                        f"unix/{plan.admin_socket}"], check=True, capture_output=True, timeout=30)
        assert _post(plan, KEY)[0] == 429  # a reload is no way around the limit
        assert _post(plan, NEW)[0] == 200
        assert proc.poll() is None


def test_limits_off_leave_no_limiter_in_the_config(tmp_path, engine):
    """All limits 0 (limits.enabled: false): the config runs on Caddy's standard build (no inferry module)."""
    text = caddy_json(_plan(tmp_path, engine), GatewaySecrets((KEY,)))
    assert "inferry_limits" not in text
    assert "inferry_limits" in caddy_json(replace(_plan(tmp_path, engine), max_in_flight=1), GatewaySecrets((KEY,)))
    assert json.loads(text)["apps"]["http"]["servers"]["gateway"]["routes"]
