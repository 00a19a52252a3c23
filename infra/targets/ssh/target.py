"""The SSH target's descriptor: GPU hosts reached over SSH, each host a replica (infra.targets.contract)."""
from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any

from infra.errors import Problem
from infra.stack.config import Deployment
from infra.targets.ssh.config import SshTarget as Section
from infra.targets.contract import DeployRequest, Resolve

if TYPE_CHECKING:
    from infra.engines.spec import ServiceSpec
    from infra.render.out import Placed
    from infra.stack.stackfile import Stack

LB_FILE = "lb-nginx.conf"
# The `target:` lines `inferry init` writes (unindented YAML, commented).
STARTER = """\
kind: ssh
hosts:                                 # each host is a replica
  - {address: 203.0.113.10, user: ubuntu, name: gpu-1}
private_key: {env: INFERRY_SSH_KEY}     # or {config: sshPrivateKey} after `pulumi config set --secret`
trust_on_first_use: false             # true records unknown host keys in known_hosts
runtime: docker                        # docker (compose, kept up by Docker) or process
"""


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
        """Every host's files in its service folder, and the load balancer's nginx config on its host."""
        from infra.render.out import Placed
        from infra.targets.ssh import render

        d = stack.deployment
        t = _section(d)
        spec = render.ssh_spec(stack)
        files = render.render_ssh_files(stack, spec) + render.render_secret_files(spec, render.redacted_values(spec))
        hosts = tuple(h.label for h in t.hosts)
        placed = [Placed(f.name, f.content, f.mode, hosts, posixpath.join(t.service_dir, f.name)) for f in files]
        if t.load_balancer is not None:
            from infra.targets.ssh.lb import nginx_conf
            from infra.targets.ssh.plan import plan_deployment

            lb = plan_deployment(d).lb
            placed.append(Placed(LB_FILE, nginx_conf(lb), 0o644, (lb.conn.name or lb.conn.address,), lb.conf_path))
        return sorted(placed, key=lambda p: p.name)

    def summary(self, d: Deployment) -> str:
        """'2 ssh host(s)'."""
        return f"{len(_section(d).hosts)} ssh host(s)"

    def replicas_behind(self, d: Deployment) -> int:
        """Every host behind a load balancer; otherwise the first host alone."""
        t = _section(d)
        return len(t.hosts) if t.load_balancer else 1

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


TARGET = Ssh()
