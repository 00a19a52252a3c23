"""Benchmark: what the gateway costs a client: a chat completion through Caddy over HTTPS next to the same
request straight to the engine, both as curl sends them, on the same host, interleaved.

Run as root after `bash scripts/test.sh` built the tools: `python bench/gateway.py [--rounds 40]`.
One docker-less test host serves the stand-in engine (its configured 20 ms per token, 8 tokens streamed) behind
a gateway whose certificate Pebble issued (tests/support/acme.py). Each round sends, in alternating order, one
streamed chat completion to `https://DOMAIN/v1/...` (TLS verified against Pebble's root; a new connection each
time, as a client without keep-alive pays it) and one to the engine on `127.0.0.1:8000` (no TLS, no key: what
the gateway stands in front of), from the gateway's host itself, so the network between is the same. Prints
medians and bests of the time to first byte and of the whole request, and gateway / direct ratios. The gateway
runs with its default limits (`--no-limits`: without them).
"""
from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DOMAIN, KEY, MODEL = "llm.bench.test", "sk-bench-9b3e6f1a4c7d02e5b8a1f4c7e0d3b6a9", "llama-3.1-8b-instruct"
BODY = json.dumps({"model": MODEL, "max_tokens": 8, "stream": True,
                   "messages": [{"role": "user", "content": "hi"}]})


def curl(host, url: str, extra: str) -> tuple[float, float]:
    """(time to first byte, total) in seconds of one streamed chat completion, as curl measures them."""
    r = host.exec(f"curl -sS -o /dev/null -w '%{{time_starttransfer}} %{{time_total}} %{{http_code}}' {extra} "
                  f"-H 'Content-Type: application/json' -d {shlex.quote(BODY)} {shlex.quote(url)}", timeout=60)
    first, total, code = r.stdout.split()
    if code != "200":
        raise SystemExit(f"{url} answered {code}: {r.stderr}")
    return float(first), float(total)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--no-limits", action="store_true", help="the gateway without its limiter (limits.enabled: "
                    "false), to see what the limiter itself costs")
    args = ap.parse_args()
    from bench.up import bench_world
    from tests.support import ssh_direct
    from tests.support.acme import start_acme
    from tests.support.ssh_env import PREFIX, BUCKET, FILES, Store, deployment, secrets, plan_for

    with bench_world("inferry-bench-gateway-") as (tmp, network, server):
        (h,) = network.add_hosts(["bgw"])
        h.set_standin(token_s=0.02)
        acme = start_acme(tmp / "acme", network.gateway, h.address)
        try:
            _push(server, tmp, PREFIX, BUCKET, FILES)
            store = Store(server.endpoint, server.region, server.access_key, server.secret_key)
            h.exec(f"echo '{network.gateway} pebble' >> /etc/hosts; echo '127.0.0.1 {DOMAIN}' >> /etc/hosts", check=True)
            (h.shared_dir / "bench-root.pem").write_text(acme.root_pem())
            gw = {"domains": [DOMAIN], "acme": {"directory": acme.directory, "ca_root": str(acme.directory_root)},
                  **({"limits": {"enabled": False}} if args.no_limits else {})}
            d = deployment([h], store, gateway=gw)
            ssh_direct.apply(plan_for(d), {**secrets([h], store), "serving.api_key": KEY})
            via = (f"https://{DOMAIN}/v1/chat/completions",
                   f"--cacert /srv/inferry-shared/bench-root.pem -H 'Authorization: Bearer {KEY}'")
            direct = ("http://127.0.0.1:8000/v1/chat/completions", "")
            got: dict[str, list[tuple[float, float]]] = {"gateway": [], "direct": []}
            for i in range(3):  # warm both paths (the certificate, the engine's first request)
                curl(h, *via), curl(h, *direct)
            for i in range(args.rounds):
                order = [("gateway", via), ("direct", direct)][:: 1 if i % 2 == 0 else -1]
                for name, (url, extra) in order:
                    got[name].append(curl(h, url, extra))
            _report(got)
        finally:
            acme.stop()


def _push(server, tmp: Path, prefix: str, bucket: str, files: dict) -> None:
    from infra.storage.settings import StoreSettings
    from infra.storage.sync import push

    (server.root / bucket).mkdir(parents=True, exist_ok=True)
    folder = tmp / "model"
    folder.mkdir()
    for rel, data in files.items():
        (folder / rel).write_bytes(data)
    push(StoreSettings(server.endpoint, server.region, bucket, server.access_key, server.secret_key), folder, prefix,
         show=False)


def _report(got: dict[str, list[tuple[float, float]]]) -> None:
    print(f"{'':>20} {'gateway median (best)':>24} {'direct median (best)':>24} {'ratio median':>12} {'ratio best':>10}")
    for i, what in enumerate(("first byte", "whole request")):
        a, b = [x[i] * 1000 for x in got["gateway"]], [x[i] * 1000 for x in got["direct"]]
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"{what:>20} {ma:>15.1f}ms ({min(a):.1f}) {mb:>15.1f}ms ({min(b):.1f}) {ma / mb:>12.2f} "
              f"{min(a) / min(b):>10.2f}")
    print(f"{len(got['gateway'])} rounds, interleaved; the gateway's figure includes a TLS handshake per request")


if __name__ == "__main__":
    main()
