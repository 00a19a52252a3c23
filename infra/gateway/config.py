"""The `gateway:` section of a target: the deployment's one public door (HTTPS, keys, limits)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypedDict

from pydantic import Field, model_validator

from infra.stack.config_targets import SecretRef, StrictSection

if TYPE_CHECKING:  # the TypedDicts' annotations only: the schema loads without the Pulumi SDK
    import pulumi

LETS_ENCRYPT = "https://acme-v02.api.letsencrypt.org/directory"
# A DNS name a certificate can be issued for (RFC 1123 labels, at least one dot); no wildcard: HTTP-01 cannot
# prove one, and Caddy would need a DNS provider module.
DNS_NAME = r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$"
# A file on the machine that deploys: read there, uploaded to the gateway's host.
LOCAL_FILE = r"^[^\x00-\x1f]+$"


class Acme(StrictSection):
    """Where certificates come from when tls is acme: Let's Encrypt, or any ACME directory (with EAB)."""

    # No braces: Caddy reads {...} in its config as a placeholder ({env.X}, {file.Y}) and would put its value in.
    directory: str = Field(default=LETS_ENCRYPT, pattern=r"^https://[^\s\"'\\{}]+$",
                           description="the ACME directory URL (Let's Encrypt's by default)")
    email: str | None = Field(default=None, pattern=r"^[^@\s\"'\\{}]+@[^@\s\"'\\{}]+$",
                              description="contact address for expiry notices")
    ca_root: str | None = Field(default=None, pattern=LOCAL_FILE, description="PEM file here with the root that "
                                "signs the directory's own HTTPS, for a private ACME server (step-ca, Pebble)")
    eab_key_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_\-]+$",
                                   description="external account binding: the key id the CA gave")
    eab_hmac_key: SecretRef | None = Field(default=None, description="external account binding: its HMAC key")

    @model_validator(mode="after")
    def _eab_pair(self) -> "Acme":
        if (self.eab_key_id is None) != (self.eab_hmac_key is None):
            raise ValueError("give both eab_key_id and eab_hmac_key (the CA's external account binding), or neither")
        return self


class Limits(StrictSection):
    """What one client may ask of the gateway (inferry's Caddy build, caddy/limits): past a limit, 429 with
    Retry-After; past max_in_flight for the whole gateway, 503. A rate allows a burst of ten seconds' worth."""

    enabled: bool = Field(default=True, description="false: no limits (Caddy's standard build has no limiter)")
    per_key_per_minute: int = Field(default=6000, ge=0, le=10_000_000, description="requests a minute per API key "
                                    "(0: no rate)")
    per_key_in_flight: int = Field(default=256, ge=0, le=1_000_000, description="requests at once per API key, "
                                   "held ones included (0: no bound)")
    per_address_per_minute: int = Field(default=6000, ge=0, le=10_000_000, description="requests a minute per "
                                        "client address, with a key or without (0: no rate)")
    per_address_in_flight: int = Field(default=128, ge=0, le=1_000_000, description="requests at once per client "
                                       "address (0: no bound); raise both when one backend sends all traffic")
    max_in_flight: int = Field(default=1024, ge=0, le=1_000_000, description="requests the gateway holds or "
                               "proxies at once, all clients together; past it 503 with Retry-After (0: no bound)")

    def plan_fields(self) -> dict[str, int]:
        """The GatewayPlan fields these limits set (all 0 when not enabled)."""
        values = (self.per_key_per_minute, self.per_key_in_flight, self.per_address_per_minute,
                  self.per_address_in_flight, self.max_in_flight)
        names = ("key_per_minute", "key_in_flight", "address_per_minute", "address_in_flight", "max_in_flight")
        return {n: v if self.enabled else 0 for n, v in zip(names, values)}


class LimitsArgs(TypedDict, total=False):
    """`gateway.limits` as a Pulumi program passes it."""

    enabled: bool
    per_key_per_minute: int
    per_key_in_flight: int
    per_address_per_minute: int
    per_address_in_flight: int
    max_in_flight: int


class Gateway(StrictSection):
    """One Caddy in front of every replica: the only public listener, HTTPS by default, keys checked at the edge."""

    host: str | None = Field(default=None, description="name or address of the host it runs on (default: the "
                             "first of target.hosts)")
    domains: list[str] = Field(default_factory=list, description="DNS names clients use; each must resolve to the "
                               "gateway host for ACME's HTTP-01 challenge")
    tls: Literal["acme", "certificate", "off"] = Field(
        default="acme", description="acme: certificates issued and renewed by themselves; certificate: the PEM "
        "chain and key the stack gives; off: plain HTTP (keys and prompts in clear)")
    acme: Acme = Field(default_factory=Acme)
    certificate: str | None = Field(default=None, pattern=LOCAL_FILE, description="PEM chain file here (tls: "
                                    "certificate)")
    certificate_key: SecretRef | None = Field(default=None, description="its private key (tls: certificate)")
    https_port: int = Field(default=443, ge=1, le=65535)
    http_port: int = Field(default=80, ge=1, le=65535, description="redirects to HTTPS and answers ACME; with "
                           "tls: off, the port that serves")
    max_body_mb: int = Field(default=32, ge=1, le=1024, description="largest request body; larger gets 413")
    hold_s: int = Field(default=30, ge=0, le=3600, description="how long a request waits for a ready replica "
                        "before 503 with Retry-After (engines restarting, a rolling update)")
    balance: Literal["least_conn", "round_robin"] = "least_conn"
    access_log_days: int = Field(default=30, ge=1, le=3650, description="days the access log (method, path, "
                                 "status, size, latency, key id; never bodies, queries or keys) is kept")
    limits: Limits = Field(default_factory=Limits)

    @model_validator(mode="after")
    def _tls_inputs(self) -> "Gateway":
        import re

        bad = [n for n in self.domains if not re.fullmatch(DNS_NAME, n)]
        if bad:
            raise ValueError(f"domains: {', '.join(map(repr, bad))} is not a DNS name (letters, digits, '-', "
                             "dot-separated, no wildcard)")
        if len(set(self.domains)) != len(self.domains):
            raise ValueError("domains: each name once")
        if self.tls == "acme" and not self.domains:
            raise ValueError("tls: acme needs domains (the DNS names clients use, pointed at the gateway host); "
                             "or give tls: certificate with your own, or tls: off for plain HTTP")
        if self.tls == "certificate" and (self.certificate is None or self.certificate_key is None):
            raise ValueError("tls: certificate needs certificate (a PEM file) and certificate_key (a secret)")
        if self.tls != "certificate" and (self.certificate or self.certificate_key):
            raise ValueError(f"certificate and certificate_key are used only with tls: certificate (tls is {self.tls})")
        if self.tls != "off" and self.https_port == self.http_port:
            raise ValueError("https_port and http_port must differ")
        return self

    @property
    def port(self) -> int:
        """The port clients use."""
        return self.http_port if self.tls == "off" else self.https_port

    def secret_refs(self, at: str) -> dict[str, SecretRef]:
        """The gateway's secrets by field path, under the section's path AT (e.g. target.gateway)."""
        refs = {f"{at}.certificate_key": self.certificate_key, f"{at}.acme.eab_hmac_key": self.acme.eab_hmac_key}
        return {k: v for k, v in refs.items() if v is not None}


class AcmeArgs(TypedDict, total=False):
    """`gateway.acme` as a Pulumi program passes it."""

    directory: str
    email: str
    ca_root: str
    eab_key_id: str
    eab_hmac_key: pulumi.Input[str]


class GatewayArgs(TypedDict, total=False):
    """`gateway:` as a Pulumi program passes it; certificate_key is the key itself."""

    host: str
    domains: list[str]
    tls: Literal["acme", "certificate", "off"]
    acme: AcmeArgs
    certificate: str
    certificate_key: pulumi.Input[str]
    https_port: int
    http_port: int
    max_body_mb: int
    hold_s: int
    balance: Literal["least_conn", "round_robin"]
    access_log_days: int
    limits: LimitsArgs
