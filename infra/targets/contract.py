"""The Target contract: what the rest of inferry asks of a target (SSH hosts, a Kubernetes cluster, ...)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from infra.errors import Problem
from infra.stack.config import Deployment
from infra.stack.late import Fill, unchanged
from infra.stack.secrets import Resolve

if TYPE_CHECKING:
    from infra.engines.spec import ServiceSpec
    from infra.render.out import Placed
    from infra.stack.stackfile import Stack

__all__ = ["DeployRequest", "Door", "Fill", "MetricsRead", "ReplicaFacts", "Resolve", "Source", "Target", "TargetArgs",
           "unchanged"]


@dataclass(frozen=True)
class TargetArgs:
    """Typed inputs of every target's Pulumi component: the deployment, the engine's service, its secrets."""

    deployment: Deployment
    spec: "ServiceSpec"  # the engine as this target runs it (Target.service_spec)
    secrets: Mapping[str, Any]  # stack field path (e.g. "serving.api_key") -> secret value (a secret Output)
    fill: Fill = unchanged  # applied to every child's inputs: puts in the late values (infra.stack.late)


@dataclass(frozen=True)
class DeployRequest:
    """What a target's deploy() gets: the checked deployment, its secrets, its component's name and options."""

    deployment: Deployment
    secrets: Mapping[str, Any]  # as TargetArgs.secrets
    name: str  # the target component's resource name (the stack-file program: the target's kind)
    opts: Any = None  # pulumi.ResourceOptions of the target component (parent, aliases, providers)
    fill: Fill = field(default=unchanged)


@dataclass(frozen=True)
class MetricsRead:
    """One replica's Prometheus /metrics as read from inside the deployment: its text, or why it was not read."""

    source: str  # where it was read, e.g. "host gpu-1"
    text: str | None
    error: str | None = None
    at_zero: bool = False  # no replica on purpose: scaled to zero, a request wakes one (error says how)


@dataclass(frozen=True)
class Source:
    """Something a target downloads at run time, and from where (an image, a package repository, a CA)."""

    what: str  # e.g. "engine image", "gateway package", "certificate authority"
    where: str  # an image reference or a URL
    field: str  # the stack field that chose it (where a policy error points)


@dataclass(frozen=True)
class Door:
    """How clients reach the deployment, as the target sets it up (the record of processing's "who can call")."""

    url: str  # the endpoint clients call
    tls: str  # how its certificate is had: "ACME from URL", "the stack's certificate", "off (plain HTTP)", ...
    keys: int  # client keys accepted now
    public_ports: tuple[int, ...]  # the ports the door listens on for the internet
    to_engine: str = ""  # how the door reaches the engines, e.g. "each host's loopback or private address"
    access_log: str = ""  # where the per-request log is kept ("" none)
    access_log_days: int | None = None


@dataclass(frozen=True)
class ReplicaFacts:
    """What one replica's machine says about itself, read from inside: never values that are secrets."""

    source: str  # e.g. "host gpu-1 (10.0.0.2)", "pod x on node y"
    place: Mapping[str, str] = field(default_factory=dict)  # address, node, region and zone labels, ...
    gpus: tuple[str, ...] = ()  # as nvidia-smi (or the node) names them
    env: Mapping[str, str] = field(default_factory=dict)  # only the telemetry switches, as the engine has them
    flags: tuple[str, ...] = ()  # the option names on the engine's command line, without their values
    listening: tuple[str, ...] = ()  # TCP addresses it listens on beyond loopback (address:port)
    # the ids of the keys a gateway there accepts (infra.gateway.caddy.key_id) -> when each was first accepted
    keys: Mapping[str, str] = field(default_factory=dict)
    data: tuple[str, ...] = ()  # folders inferry keeps data in there (weights, engine files, gateway state)
    error: str | None = None  # why it was not read


class Target(Protocol):
    """One kind of place an engine runs; each folder under infra/targets/ exports one (its TARGET)."""

    kind: str  # the stack file's target.kind
    config: type  # its `target:` section: a TargetBase model with `kind: Literal[<kind>]` (registered with the schema)
    starter: str  # the `target:` lines `inferry init` writes (unindented YAML, commented)

    def deploy(self, req: DeployRequest) -> dict[str, Any]:
        """Create the Pulumi resources of the deployment (inside a Pulumi program); returns its exports
        (endpoint, endpoints, ...)."""
        ...

    def checks(self, d: Deployment) -> list[Problem]:
        """`inferry validate` findings the schema cannot see ([] for another target's stack)."""
        ...

    def service_spec(self, d: Deployment) -> "ServiceSpec":
        """The engine's ServiceSpec with the paths this target runs it with (`inferry render --json`)."""
        ...

    def placements(self, stack: "Stack") -> list["Placed"]:
        """Every file `inferry render --out` writes and where each goes; secrets as placeholders."""
        ...

    def summary(self, d: Deployment) -> str:
        """Where the engine runs, for validate's OK line (e.g. '2 ssh host(s)')."""
        ...

    def replicas_behind(self, d: Deployment) -> int:
        """Engine replicas that serve the stack's first endpoint (a load balancer spreads over all)."""
        ...

    def host_status(self, stack: "Stack", resolve: Resolve) -> list[str]:
        """`inferry status` lines about the machines themselves ([] when the target has none to read)."""
        ...

    def engine_metrics(self, stack: "Stack", resolve: Resolve) -> list[MetricsRead] | None:
        """Each replica's /metrics read from inside the deployment (over SSH, in the cluster), never through the
        public door, which refuses it; None when this target's endpoint still serves them (read its URL)."""
        ...

    def run_time_sources(self, d: Deployment) -> list[Source]:
        """What the deployment downloads at run time and from where (images, packages, a certificate authority)."""
        ...

    def door(self, d: Deployment) -> Door:
        """How clients reach the deployment, from the stack (the record of processing)."""
        ...

    def replica_facts(self, stack: "Stack", resolve: Resolve) -> list[ReplicaFacts]:
        """Each replica's machine as read from inside now: its GPUs, the engine's telemetry switches and options,
        what listens, what data is kept (the record of processing)."""
        ...
