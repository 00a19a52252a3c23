"""The SSH target's descriptor: GPU hosts reached over SSH, each host a replica (infra.targets.contract)."""
from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any

from infra.errors import Problem
from infra.stack.config import Deployment
from infra.targets.ssh.config import SshTarget as Section
from infra.targets.contract import DeployRequest, Door, MetricsRead, ReplicaFacts, Resolve, Source

if TYPE_CHECKING:
    from infra.engines.spec import ServiceSpec
    from infra.render.out import Placed
    from infra.stack.stackfile import Stack

GATEWAY_FILE = "gateway-caddy.json"
# The `target:` lines `inferry init` writes (unindented YAML, commented).
STARTER = """\
kind: ssh
hosts:                                 # each host is a replica
  - {address: 203.0.113.10, user: ubuntu, name: gpu-1}
private_key: {env: INFERRY_SSH_KEY}     # or {config: sshPrivateKey} after `pulumi config set --secret`
trust_on_first_use: false             # true records unknown host keys in known_hosts
runtime: docker                        # docker (compose, kept up by Docker) or process
gateway:                               # the one public door: Caddy on the first host, HTTPS from Let's Encrypt
  domains: [llm.example.com]           # DNS names pointed at that host (ports 80 and 443 open to the world)
"""


def ssh_spec_of(hp: Any) -> "ServiceSpec":
    """A host plan's service spec."""
    from infra.targets.ssh.speccodec import from_data

    return from_data(hp.service.spec)


def _section(d: Deployment) -> Section:
    assert isinstance(d.target, Section)
    return d.target


class Ssh:
    """SSH hosts: facts, preflight, weights, the engine service (docker or process), a load balancer."""

    kind = "ssh"
    config = Section
    starter = STARTER

    def deploy(self, req: DeployRequest) -> dict[str, Any]:
        """The SshTarget component of the deployment; returns endpoint and endpoints."""
        from infra.targets.ssh.component import deploy

        return deploy(req)

    def checks(self, d: Deployment) -> list[Problem]:
        """Port clashes, runtimes that cannot serve the engine, pinned keys vs trust on first use."""
        from infra.targets.ssh.checks import ssh_checks

        return ssh_checks(d)

    def service_spec(self, d: Deployment) -> "ServiceSpec":
        """Container paths under docker, host paths for a bare process."""
        from infra.targets.ssh.render import ssh_spec

        return ssh_spec(d)

    def placements(self, stack: "Stack") -> list["Placed"]:
        """Every host's files in its service folder (hosts that get the same file share it; a file that differs
        per host, such as the address an engine listens on behind the gateway, is named HOST.NAME for the
        others), and the gateway's Caddy config on its host, secrets redacted."""
        from infra.render.out import Placed
        from infra.targets.ssh import render
        from infra.targets.ssh.plan import plan_deployment
        from infra.targets.ssh.speccodec import from_data

        d = stack.deployment
        p = plan_deployment(d)
        groups: dict[tuple[str, str, int], list[str]] = {}
        for hp in p.hosts:
            secret = render.render_secret_files(from_data(hp.service.spec), render.redacted_values(ssh_spec_of(hp)))
            files = [(posixpath.basename(f.path), f.content, f.mode) for f in hp.service.files]
            for name, content, mode in files + [(f.name, f.content, f.mode) for f in secret]:
                groups.setdefault((name, content, mode), []).append(hp.label)
        placed, seen = [], set()
        for (name, content, mode), hosts in groups.items():
            shown = name if name not in seen else f"{hosts[0]}.{name}"
            seen.add(name)
            placed.append(Placed(shown, content, mode, tuple(hosts), posixpath.join(_section(d).service_dir, name)))
        if p.gateway is not None:
            from infra.gateway.caddy import GatewaySecrets, caddy_json

            g = p.gateway
            red = GatewaySecrets(("REDACTED-serving-api_key",), "REDACTED-target-gateway-certificate_key",
                                 "REDACTED-target-gateway-acme-eab_hmac_key")
            placed.append(Placed(GATEWAY_FILE, caddy_json(g.plan, red), 0o600, (g.conn.name or g.conn.address,),
                                 g.conf_path))
        return sorted(placed, key=lambda x: x.name)

    def summary(self, d: Deployment) -> str:
        """'2 ssh host(s)'."""
        return f"{len(_section(d).hosts)} ssh host(s)"

    def replicas_behind(self, d: Deployment) -> int:
        """Every host behind the gateway; otherwise the first host alone."""
        t = _section(d)
        return len(t.hosts) if t.gateway else 1

    def host_status(self, stack: "Stack", resolve: Resolve) -> list[str]:
        """Each host's engine as its runtime reports it (restarts since the last apply)."""
        from infra.errors import InferryError
        from infra.stack.secretfix import SecretField
        from infra.targets.ssh.status import host_lines

        d = stack.deployment
        try:
            key = resolve(_section(d).private_key, SecretField.PRIVATE_KEY)
        except InferryError as e:
            return [f"hosts: not read: {e.render()}"]
        return host_lines(d, key, stack.name)

    def engine_metrics(self, stack: "Stack", resolve: Resolve) -> list[MetricsRead]:
        """Each host's engine /metrics, read over SSH from the address the engine listens on."""
        from infra.errors import InferryError
        from infra.stack.secretfix import SecretField
        from infra.targets.ssh.status import metrics_reads

        d = stack.deployment
        try:
            key = resolve(_section(d).private_key, SecretField.PRIVATE_KEY)
        except InferryError as e:
            return [MetricsRead("hosts", None, f"not read: {e.render()}")]
        try:  # a gateway-less TensorRT-LLM host's auth proxy wants the key on /metrics too
            api_key = None if _section(d).gateway else resolve(d.serving.api_key, SecretField.API_KEY)
        except InferryError:
            api_key = None
        return metrics_reads(d, key, api_key)

    def run_time_sources(self, d: Deployment) -> list[Source]:
        """The engine image under docker; Caddy's package repository and the ACME directory with a gateway."""
        from infra.targets.ssh.record import run_time_sources

        return run_time_sources(d)

    def door(self, d: Deployment) -> Door:
        """The gateway (its TLS, keys, ports and access log), or every host's engine port without one."""
        from infra.targets.ssh.record import door

        return door(d)

    def replica_facts(self, stack: "Stack", resolve: Resolve) -> list[ReplicaFacts]:
        """Each host read over SSH: nvidia-smi, the engine process's switches and options, listeners, data."""
        from infra.errors import InferryError
        from infra.stack.secretfix import SecretField
        from infra.targets.ssh.record import replica_facts

        d = stack.deployment
        try:
            key = resolve(_section(d).private_key, SecretField.PRIVATE_KEY)
        except InferryError as e:
            return [ReplicaFacts("hosts", error=f"not read: {e.render()}")]
        return replica_facts(d, key)


TARGET = Ssh()
