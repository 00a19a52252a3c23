"""The `target:` section of an SSH stack: hosts, keys, runtime, rollout, the gateway."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, Required, TypedDict, Union

from pydantic import Field, field_validator, model_validator

from infra.gateway.config import Gateway, GatewayArgs
from infra.stack.config_targets import INT32_MAX, SHARE, SecretRef, StrictSection, TargetBase
from infra.stack.secretfix import SecretField

if TYPE_CHECKING:  # the TypedDicts' annotations only: the schema loads without the Pulumi SDK
    import pulumi

# A host path that reaches shell, compose, YAML, systemd and nginx files: characters none of them reads as syntax.
SAFE_PATH = r"^/[A-Za-z0-9._@+=,~/-]*$"
SAFE_PATH_TEXT = ("an absolute path of letters, digits and . _ - @ + = , ~ / only (no spaces, quotes, ';', '$', "
                  "':' or other characters a shell, nginx, compose or systemd file would read as syntax)")


class SshHost(StrictSection):
    """One GPU VM reachable over SSH."""

    address: str = Field(min_length=1, pattern=r"^[A-Za-z0-9.\-:\[\]]+$")
    user: str = Field(default="root", pattern=r"^[a-z_][a-z0-9_\-]{0,31}$")
    port: int = Field(default=22, ge=1, le=65535)
    name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,62}$")
    host_key: str | None = Field(default=None, pattern=r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/=]+$",
                                 description="pinned public host key, 'TYPE BASE64'")
    private_address: str | None = Field(default=None, pattern=r"^[A-Za-z0-9.\-:\[\]]+$",
                                        description="its address on the private network the gateway reaches it "
                                        "by: the engine listens there only, never on the public address")

    @property
    def label(self) -> str:
        """How the host is named in messages and resource names."""
        return self.name or self.address


class SshTarget(TargetBase):
    """Provision one or more VMs over SSH; each host is a replica."""

    kind: Literal["ssh"]
    hosts: list[SshHost] = Field(min_length=1)
    private_key: SecretRef
    known_hosts: str | None = Field(default=None, description="known_hosts file; default ~/.ssh/known_hosts")
    trust_on_first_use: bool = False
    runtime: Literal["docker", "process"] = "docker"
    install_docker: bool = False
    weights_cache: str = Field(default="/var/lib/inferry/weights", pattern=SAFE_PATH, description=SAFE_PATH_TEXT)
    # It lands in shell commands (quoted), the compose file (where '$' interpolates and ':' splits a volume),
    # YAML, and the nginx config that runs as root (where ';' ends a directive and starts the next): an allowlist
    # of characters none of them reads as syntax, not a list of the ones someone thought of.
    service_dir: str = Field(default="/etc/inferry", pattern=SAFE_PATH, description=SAFE_PATH_TEXT)
    # Hosts worked on at once by this machine (SSH sessions and threads; weights go host <- store directly).
    max_parallel: int = Field(default=64, ge=1, le=256)
    health_timeout_s: int = Field(default=900, ge=5, le=INT32_MAX)
    rollout: Literal["rolling", "parallel"] = Field(
        default="rolling", description="rolling: one replica's engine is changed at a time, each healthy before the "
        "next, and a failure stops the rollout with the others untouched; parallel: all at once (a faster first "
        "apply, but a bad change restarts every replica)")
    # Engines restarting at once in a rolling update (Kubernetes' maxUnavailable): a count, or a share of the hosts
    # (rounded down, at least 1): the others keep serving behind the load balancer throughout.
    max_unavailable: Union[int, str] = Field(default=1, description="a count of hosts (e.g. 4) or a share of "
                                             "them (e.g. 25%)")
    gateway: Gateway | None = Field(default=None, description="the deployment's one public door (Caddy on one "
                                    "of the hosts): HTTPS, API keys and an allowlist at the edge")
    # Leaving a provider leaves nothing behind: destroy removes everything inferry put on the hosts unless the
    # stack keeps it on purpose (the next tenant of a rented VM reads its disk).
    keep_on_destroy: list[Literal["weights"]] = Field(
        default_factory=list, description="what destroy leaves on the hosts on purpose: 'weights' keeps the "
        "weights cache for a later apply; everything else inferry put there is removed")


    @model_validator(mode="before")
    @classmethod
    def _load_balancer_renamed(cls, data: object) -> object:
        if isinstance(data, dict) and "load_balancer" in data:
            raise ValueError("load_balancer is now gateway (Caddy, HTTPS by default): write `gateway: {host: H, "
                             "domains: [api.example.com]}` for HTTPS from Let's Encrypt, or `gateway: {host: H, "
                             "tls: off, http_port: PORT}` for the same plain-HTTP balancer as before")
        return data

    @field_validator("max_unavailable", mode="before")
    @classmethod
    def _count_or_share(cls, v: object) -> object:
        ok = (type(v) is int and 1 <= v <= INT32_MAX) or (isinstance(v, str) and SHARE.fullmatch(v))
        if not ok:
            raise ValueError("expected a count of hosts (1 or more) or a share of them from 1% to 100%, e.g. 25%")
        return v
    @model_validator(mode="after")
    def _unique_hosts(self) -> "SshTarget":
        labels = [h.label for h in self.hosts]
        dupes = sorted({x for x in labels if labels.count(x) > 1})
        if dupes:
            raise ValueError(f"host names must be unique; repeated: {', '.join(dupes)}")
        g = self.gateway
        if g and g.host is not None and g.host not in labels + [h.address for h in self.hosts]:
            raise ValueError(f"gateway.host {g.host!r} is not one of target.hosts")
        return self

    @property
    def gateway_host(self) -> SshHost | None:
        """The host the gateway runs on (the first one unless gateway.host names another)."""
        g = self.gateway
        if g is None:
            return None
        return next(h for h in self.hosts if g.host in (None, h.label, h.address))

    @property
    def instances(self) -> int:
        """Engine instances the stack runs: one per host."""
        return len(self.hosts)

    @property
    def streams_weights(self) -> bool | None:
        """Whether the target asks the engine to stream weights from the store (None: it has no say)."""
        return None

    def secret_refs(self) -> dict[str, SecretRef]:
        """The target's own secrets, by field path: the SSH private key, the gateway's."""
        gateway = self.gateway.secret_refs("target.gateway") if self.gateway else {}
        return {SecretField.PRIVATE_KEY: self.private_key, **gateway}

# The same section as a user's Pulumi program passes it to inferry.Deployment: values may be Outputs
# (tests/component/test_component_args.py keeps these keys those of the models above).
class SshHostArgs(TypedDict, total=False):
    """One GPU VM: its address, user and host key may be another resource's Outputs; name is then required
    (it names the host's resources, which must be known before the address is)."""

    address: Required[pulumi.Input[str]]
    name: str
    user: pulumi.Input[str]
    port: int
    host_key: pulumi.Input[str]
    private_address: pulumi.Input[str]


class SshTargetArgs(TypedDict, total=False):
    """`target:` of kind ssh; private_key is the key itself (e.g. a key resource's private_key_openssh)."""

    kind: Required[Literal["ssh"]]
    hosts: Required[Sequence[SshHostArgs]]
    private_key: Required[pulumi.Input[str]]
    known_hosts: str
    trust_on_first_use: bool
    runtime: Literal["docker", "process"]
    install_docker: bool
    weights_cache: str
    service_dir: str
    max_parallel: int
    health_timeout_s: int
    rollout: Literal["rolling", "parallel"]
    max_unavailable: Union[int, str]
    gateway: GatewayArgs
    keep_on_destroy: Sequence[Literal["weights"]]
