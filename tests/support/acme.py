"""A real ACME server for the gateway's tests: Pebble (Let's Encrypt's test CA) and its DNS server.

Pebble validates HTTP-01 for real: it asks pebble-challtestsrv (its DNS server) where a name points, and that
answers every name with the gateway host's address, so Pebble connects to port 80 there, where Caddy answers
the challenge. Pebble serves its directory over HTTPS with the certificate of its own module's test/certs
(names `localhost` and `pebble`): the gateway host resolves `pebble` to this machine, and the stack trusts that
root (`gateway.acme.ca_root`). Certificates Pebble issues chain to a root it makes at start: `root_pem()`.
"""
from __future__ import annotations

import json
import socket
import ssl
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.support.ports import free_ports
from tests.support.realengine import TOOLS_BIN

CERTS = TOOLS_BIN.parent / "pebble-certs"


def _wait_port(bind: str, port: int, what: str, proc: subprocess.Popen, log: Path) -> None:
    for _ in range(100):
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited: {log.read_text()[-2000:]}")
        try:
            socket.create_connection((bind, port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} does not listen on {bind}:{port}: {log.read_text()[-2000:]}")


@dataclass
class Acme:
    """A running Pebble: its directory URL as the gateway host reaches it, the root its directory's HTTPS uses."""

    directory: str
    directory_root: Path  # the stack's gateway.acme.ca_root
    management: str
    procs: list[subprocess.Popen]

    def root_pem(self) -> str:
        """The root Pebble's certificates chain to (a client's trust anchor)."""
        ctx = ssl.create_default_context(cafile=str(self.directory_root))
        ctx.check_hostname = False  # the management port is reached by address; the chain is still verified
        with urllib.request.urlopen(f"{self.management}/roots/0", context=ctx, timeout=10) as r:
            return r.read().decode()

    def stop(self) -> None:
        """Stop Pebble and its DNS server."""
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def start_acme(folder: Path, bind: str, answer: str, http_port: int = 80, validity_s: int = 7776000,
               name: str = "pebble") -> Acme:
    """Pebble on BIND (this machine's address on the hosts' network); its DNS answers every name with ANSWER, and
    it validates HTTP-01 on HTTP_PORT there. Its certificates last VALIDITY_S (Let's Encrypt's 90 days by default);
    its directory is reached as NAME (`pebble` or `localhost`: the names its own certificate holds)."""
    for tool in ("pebble", "pebble-challtestsrv"):
        if not (TOOLS_BIN / tool).is_file():
            raise RuntimeError(f"the ACME tests need {tool}: run `bash scripts/tools.sh gateway`")
    folder.mkdir(parents=True, exist_ok=True)
    for _ in range(2):
        try:
            return _start(folder, bind, answer, http_port, validity_s, name, free_ports(4, bind))
        except PortTaken:
            # a port picked free was taken before Pebble bound it (by any socket on this machine, an outgoing
            # connection's own port included): pick again (seen once in CI)
            continue
    return _start(folder, bind, answer, http_port, validity_s, name, free_ports(4, bind))


class PortTaken(RuntimeError):
    """A server could not bind a port picked free a moment before."""


def _start(folder: Path, bind: str, answer: str, http_port: int, validity_s: int, name: str,
           ports: list[int]) -> Acme:
    dns, mgmt_dns, acme, mgmt = ports
    config = {"pebble": {
        "listenAddress": f"{bind}:{acme}", "managementListenAddress": f"{bind}:{mgmt}",
        "certificate": str(CERTS / "localhost" / "cert.pem"), "privateKey": str(CERTS / "localhost" / "key.pem"),
        "httpPort": http_port, "tlsPort": 443, "ocspResponderURL": "", "externalAccountBindingRequired": False,
        "profiles": {"default": {"description": "the test profile", "validityPeriod": validity_s}}}}
    (folder / "pebble.json").write_text(json.dumps(config))
    dns_log, pebble_log = folder / "challtestsrv.log", folder / "pebble.log"
    chall = subprocess.Popen(
        [str(TOOLS_BIN / "pebble-challtestsrv"), "-defaultIPv4", answer, "-defaultIPv6", "",
         "-dnsserver", f"{bind}:{dns}", "-management", f"{bind}:{mgmt_dns}", "-http01", "", "-https01", "",
         "-tlsalpn01", "", "-doh", ""], stdout=dns_log.open("w"), stderr=subprocess.STDOUT)
    # No nonce rejections and no sleeps: Pebble's defaults (5% bad nonces, random delays) only slow tests down.
    env = {"PEBBLE_VA_NOSLEEP": "1", "PEBBLE_WFE_NONCEREJECT": "0", "PATH": "/usr/bin:/bin"}
    pebble = subprocess.Popen([str(TOOLS_BIN / "pebble"), "-config", str(folder / "pebble.json"),
                               "-dnsserver", f"{bind}:{dns}"], env=env, stdout=pebble_log.open("w"),
                              stderr=subprocess.STDOUT)
    a = Acme(f"https://{name}:{acme}/dir", CERTS / "pebble.minica.pem", f"https://{bind}:{mgmt}", [chall, pebble])
    try:
        _wait_port(bind, dns, "pebble-challtestsrv", chall, dns_log)
        _wait_port(bind, acme, "pebble", pebble, pebble_log)
        _wait_port(bind, mgmt, "pebble's management", pebble, pebble_log)
    except RuntimeError as e:
        a.stop()
        if "address already in use" in str(e):
            raise PortTaken(str(e)) from None
        raise
    except Exception:
        a.stop()
        raise
    return a
