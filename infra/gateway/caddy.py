"""The gateway's Caddy config (JSON), computed from typed inputs: no template, so no value can become syntax.

What it does, in route order on the public server:
- `/health` (GET/HEAD) answers the replicas' health status and nothing else (no body, no engine headers);
- the engine's OpenAI routes (Engine.api_routes) need `Authorization: Bearer KEY` with one of the keys; the
  header is removed before the request reaches an engine (engines carry no client key behind the gateway);
  without a valid key, 401 with `WWW-Authenticate: Bearer`;
- every other path is 404: metrics, docs, openapi.json and the engines' admin and weight routes.
Port 80 only redirects to HTTPS (Caddy answers ACME's HTTP-01 challenges there itself). Responses are
streamed; request bodies are held in memory (never on disk) so that a request a replica drops before answering
is sent again to another; a request waits up to `hold_s` for a ready replica, then gets 503 with
`Retry-After` (never a bare 502: clients such as the OpenAI SDK retry a 503 after the time it names).
With `metrics_port`, Caddy's own request metrics are served on that port alone (never on the public one): an
autoscaler wakes a replica on `caddy_http_requests_in_flight{handler="log_append"}`, which counts only the
requests that passed the key check (`WAKE_HANDLER`), held or proxied; `/health` neither holds nor counts.

The access log (`access.log`, 0600, rolled daily, kept `access_log_days`) has per request the method, the path
without its query, status, response size, duration and the id of the key used (`key_id`: a hash prefix, never
the key); request and response headers, client addresses and TLS details are filtered out before writing.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import posixpath
from dataclasses import dataclass

TAG = "inferry"  # the loaded certificate's tag (tls: certificate)
ACCESS_LOGGER = "http.log.access.access"  # where a server with default_logger_name "access" logs requests
# Access-log fields removed before a line is written (Caddy's filter encoder; `a>b` is field b inside a).
DROPPED = ("request>headers", "resp_headers", "request>remote_ip", "request>remote_port", "request>client_ip",
           "request>tls", "user_id")
# Where a proxy in front of the gateway may run (an Ingress controller in the cluster): its X-Forwarded-For is read.
PRIVATE_RANGES = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "127.0.0.0/8", "fc00::/7", "::1/128")
WAKE_HANDLER = "log_append"  # the top-level handler only a request with a valid key reaches (its metrics)


@dataclass(frozen=True)
class GatewayPlan:
    """Everything the gateway's config says, but its secrets."""

    state_dir: str  # Caddy's own folder on its host: config, data (ACME account, certificates), socket, log
    upstreams: tuple[str, ...]  # "address:port" of every replica's engine
    api_routes: tuple[str, ...]
    health_path: str
    tls: str  # acme | certificate | off
    domains: tuple[str, ...] = ()
    https_port: int = 443
    http_port: int = 80
    acme_directory: str = ""
    acme_email: str = ""
    acme_ca_root: str = ""  # PEM text of the root the ACME directory's HTTPS is signed by ("" = the system's)
    eab_key_id: str = ""
    certificate: str = ""  # PEM chain (tls: certificate): public; its key is a secret
    max_body_bytes: int = 32 << 20
    hold_s: int = 30
    balance: str = "least_conn"
    access_log_days: int = 30
    metrics_port: int = 0  # 0: no metrics listener
    retry_after_s: int = 10  # what a 503 tells the client to wait before trying again
    # Limits (inferry's Caddy build: caddy/limits); all 0: no limiter in the config (Caddy's standard build runs it).
    key_per_minute: int = 0
    key_in_flight: int = 0
    address_per_minute: int = 0
    address_in_flight: int = 0
    max_in_flight: int = 0
    behind_proxy: bool = False  # a proxy in front (an Ingress) names the client in X-Forwarded-For

    @property
    def limited(self) -> bool:
        """Whether the config uses inferry's limits module."""
        return any((self.key_per_minute, self.key_in_flight, self.address_per_minute, self.address_in_flight,
                    self.max_in_flight))

    @property
    def port(self) -> int:
        """The port clients use."""
        return self.http_port if self.tls == "off" else self.https_port

    @property
    def admin_socket(self) -> str:
        """Caddy's admin API: a unix socket only root reads (never a TCP port another local user could reach)."""
        return posixpath.join(self.state_dir, "admin.sock")

    @property
    def ca_root_path(self) -> str:
        """Where acme_ca_root is written on the host."""
        return posixpath.join(self.state_dir, "acme-ca-root.pem")


@dataclass(frozen=True)
class GatewaySecrets:
    """The gateway's secret inputs, resolved at apply time."""

    api_keys: tuple[str, ...]  # every key clients may use (the current one first)
    certificate_key: str = ""
    eab_hmac_key: str = ""


def utc_text(now: dt.datetime | None = None) -> str:
    """A time as the record and the gateway's key ledger write it (UTC, to the second)."""
    return (now or dt.datetime.now(dt.timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")


def key_id(key: str) -> str:
    """How the access log names a key: the first 12 hex digits of its sha256 (the key cannot be read back)."""
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()[:12]


def _json_body(message: str, kind: str) -> str:
    return json.dumps({"error": {"message": message, "type": kind}})


def _proxy(p: GatewayPlan, health: bool = False) -> dict:
    """reverse_proxy over the replicas; for health, only the status comes back."""
    h: dict = {
        "handler": "reverse_proxy",
        "upstreams": [{"dial": u} for u in p.upstreams],
        "load_balancing": {"selection_policy": {"policy": p.balance}, "try_duration": f"{p.hold_s}s",
                           "try_interval": "250ms", "retry_match": [{"method": ["GET", "POST"]}]},
        "health_checks": {"active": {"uri": p.health_path, "interval": "2s", "timeout": "2s"}},
        "flush_interval": -1,  # stream tokens as they come
        # Every body the gateway lets through is held in memory (never on disk) until the engine answers, so a
        # request an engine drops before its first response byte is sent again to a ready replica (retry_match):
        # a replica restarting in a rolling update (Docker's port proxy takes the connection of a stopped
        # container, then closes it) fails no request. Generation has no side effects; once the response has
        # begun nothing is retried. GET is named too: a retry_match replaces Caddy's default (GET only).
        "request_buffers": p.max_body_bytes + 1,
        "transport": {"protocol": "http", "dial_timeout": "2s"},
        "headers": {"request": {"delete": ["Authorization"]}},
    }
    if health:  # the API route's proxy runs the active health checks; this one only asks, and never holds
        del h["health_checks"], h["request_buffers"]
        del h["load_balancing"]["try_duration"], h["load_balancing"]["try_interval"]
        del h["load_balancing"]["retry_match"]
        h["rewrite"] = {"method": "GET", "uri": p.health_path}
        h["handle_response"] = [{"routes": [{"handle": [
            {"handler": "static_response", "status_code": "{http.reverse_proxy.status_code}"}]}]}]
    return h


def _limit(zone: str, key: str, per_minute: int, in_flight: int, **extra) -> list[dict]:
    """inferry_limits (caddy/limits): at most per_minute a minute (a burst of ten seconds' worth) and in_flight at
    once for each value of key; none when both are 0."""
    if not (per_minute or in_flight):
        return []
    return [{"handler": "inferry_limits", "zone": zone, "key": key, "per_minute": per_minute,
             "burst": max(1, per_minute // 6) if per_minute else 0, "max_in_flight": in_flight, **extra}]


def _routes(p: GatewayPlan, keys: tuple[str, ...]) -> list[dict]:
    # A declared length over the limit is answered 413 at once; a chunked body is cut at the limit as it streams.
    too_big = {"expression": f"{{http.request.header.Content-Length}} != '' && "
                             f"int({{http.request.header.Content-Length}}) > {p.max_body_bytes}"}
    serve = {"handler": "subroute", "routes": [
        {"match": [too_big], "handle": [{"handler": "static_response", "status_code": 413,
                                         "headers": {"Content-Type": ["application/json"]},
                                         "body": _json_body(f"the request body is over {p.max_body_bytes} "
                                                            "bytes", "request_too_large")}]},
        {"handle": [{"handler": "request_body", "max_size": p.max_body_bytes}, _proxy(p)]}]}
    paths = list(p.api_routes)
    # Every API request, with a key or not, counts against its address first (a flood without a key included);
    # an IPv6 client by its /64, the block one host is routinely given. (Caddy has no http.request.client_ip:
    # the server's client address, after trusted_proxies, is the variable client_ip.)
    by_address = _limit("address", "{http.vars.client_ip}", p.address_per_minute, p.address_in_flight,
                        ipv6_prefix=64, message="too many requests from this address")
    # The whole gateway's bound: requests held while no replica is ready queue here, and past it get 503.
    queue = _limit("all", "all", 0, p.max_in_flight, status_code=503, retry_after_s=p.retry_after_s,
                   message="the endpoint is at capacity")
    # Top-level routes, one per key (the access log names the key a request used): Caddy instruments only a
    # server's top-level handlers, so `log_append` (WAKE_HANDLER) counts exactly the requests with a valid key.
    return [
        {"match": [{"path": ["/health"], "method": ["GET", "HEAD"]}], "handle": [_proxy(p, health=True)],
         "terminal": True},
        *([{"match": [{"path": paths}], "handle": by_address}] if by_address else []),
        *[{"match": [{"path": paths, "header": {"Authorization": [f"Bearer {k}"]}}],
           "handle": [{"handler": "log_append", "key": "key_id", "value": key_id(k)},
                      *_limit("key", key_id(k), p.key_per_minute, p.key_in_flight,
                              message="too many requests for this API key"), *queue, serve], "terminal": True}
          for k in keys],
        {"match": [{"path": paths}], "terminal": True, "handle": [
            {"handler": "static_response", "status_code": 401,
             "headers": {"WWW-Authenticate": ["Bearer"], "Content-Type": ["application/json"]},
             "body": _json_body("a valid API key is required (Authorization: Bearer KEY)", "authentication_error")}]},
        {"handle": [{"handler": "static_response", "status_code": 404,
                     "headers": {"Content-Type": ["application/json"]},
                     "body": _json_body("not found", "not_found")}]},
    ]


def _server(p: GatewayPlan, keys: tuple[str, ...]) -> dict:
    s: dict = {
        "listen": [f":{p.port}"],
        "routes": _routes(p, keys),
        "read_header_timeout": "10s",
        "idle_timeout": "120s",
        "max_header_bytes": 64 << 10,
        "logs": {"default_logger_name": "access"},
        "automatic_https": {"disable": True} if p.tls == "off" else {"disable_redirects": True},
        "errors": {"routes": [_unavailable(p)]},
    }
    if p.behind_proxy:  # the Ingress's address is the proxy's: the client is the one it names
        s["trusted_proxies"] = {"source": "static", "ranges": list(PRIVATE_RANGES)}
        # Strict: the client is the rightmost address not a proxy's. A proxy appends what it saw, so everything
        # left of that is the client's own say and may be forged to dodge its address's limit.
        s["trusted_proxies_strict"] = 1
    if p.tls == "certificate":
        s["tls_connection_policies"] = [{"certificate_selection": {"any_tag": [TAG]}}]
    elif p.tls == "acme":
        s["tls_connection_policies"] = [{}]
    return s


def _unavailable(p: GatewayPlan) -> dict:
    """No replica answered within the hold (none ready, none reachable): 503 and when to try again."""
    return {"match": [{"expression": "{http.error.status_code} in [502, 503, 504]"}], "handle": [
        {"handler": "static_response", "status_code": 503,
         "headers": {"Retry-After": [str(p.retry_after_s)], "Content-Type": ["application/json"]},
         "body": _json_body(f"no replica is ready yet; retry in {p.retry_after_s} s", "service_unavailable")}]}


def _metrics(p: GatewayPlan) -> dict:
    """Caddy's Prometheus metrics on their own port (the public server answers 404 for /metrics)."""
    return {"listen": [f":{p.metrics_port}"], "automatic_https": {"disable": True}, "routes": [
        {"match": [{"path": ["/metrics"]}], "handle": [{"handler": "metrics"}]}]}


def _redirect(p: GatewayPlan) -> dict:
    port = "" if p.https_port == 443 else f":{p.https_port}"
    return {"listen": [f":{p.http_port}"], "automatic_https": {"disable": True}, "routes": [{"handle": [
        {"handler": "static_response", "status_code": 308,
         "headers": {"Location": [f"https://{{http.request.host}}{port}{{http.request.uri}}"]}}]}]}


def _tls(p: GatewayPlan, sec: GatewaySecrets) -> dict:
    if p.tls == "certificate":
        return {"certificates": {"load_pem": [{"certificate": p.certificate, "key": sec.certificate_key,
                                               "tags": [TAG]}]}}
    issuer: dict = {"module": "acme", "ca": p.acme_directory}
    if p.acme_email:
        issuer["email"] = p.acme_email
    if p.acme_ca_root:
        issuer["trusted_roots_pem_files"] = [p.ca_root_path]
    if p.eab_key_id:
        issuer["external_account"] = {"key_id": p.eab_key_id, "mac_key": sec.eab_hmac_key}
    return {"certificates": {"automate": list(p.domains)},
            "automation": {"policies": [{"subjects": list(p.domains), "issuers": [issuer]}]}}


def caddy_config(p: GatewayPlan, sec: GatewaySecrets) -> dict:
    """The whole Caddy config: admin on a root-only socket, nothing persisted but ACME data, one server."""
    servers = {"gateway": _server(p, sec.api_keys)}
    if p.tls != "off":
        servers["redirect"] = _redirect(p)
    apps: dict = {"http": {"http_port": p.http_port, "https_port": p.https_port, "servers": servers}}
    if p.metrics_port:
        servers["metrics"] = _metrics(p)
        apps["http"]["metrics"] = {}
    if p.tls != "off":
        apps["tls"] = _tls(p, sec)
    return {
        "admin": {"listen": f"unix/{p.admin_socket}|0600", "config": {"persist": False}},
        "storage": {"module": "file_system", "root": posixpath.join(p.state_dir, "data")},
        "logging": {"logs": {
            "default": {"level": "INFO", "exclude": [ACCESS_LOGGER], "writer": {
                "output": "file", "filename": posixpath.join(p.state_dir, "caddy.log"), "mode": "0600",
                "roll_size_mb": 10, "roll_keep": 5}},
            "access": _access_log(p)}},
        "apps": apps,
    }


def _access_log(p: GatewayPlan) -> dict:
    """The access log: what a reviewer may read about each request, nothing from its body or headers."""
    fields: dict = {f: {"filter": "delete"} for f in DROPPED}
    fields["request>uri"] = {"filter": "regexp", "regexp": r"\?.*$", "value": ""}  # the path without its query
    return {"level": "INFO", "include": [ACCESS_LOGGER],
            "encoder": {"format": "filter", "wrap": {"format": "json"}, "fields": fields},
            # Rolled daily and by size; rolled files older than the stack's days are deleted (at most one file a
            # day more: roll_keep counts files, so heavy traffic rolling by size keeps fewer days, never more).
            "writer": {"output": "file", "filename": posixpath.join(p.state_dir, "access.log"), "mode": "0600",
                       "roll_interval": "24h", "roll_size_mb": 100, "roll_keep_days": p.access_log_days,
                       "roll_keep": p.access_log_days + 1}}


def caddy_json(p: GatewayPlan, sec: GatewaySecrets) -> str:
    """caddy_config as the file Caddy reads (sorted keys: the same inputs give the same bytes)."""
    return json.dumps(caddy_config(p, sec), indent=2, sort_keys=True) + "\n"
