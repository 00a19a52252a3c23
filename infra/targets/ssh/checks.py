"""`inferry validate` checks for the SSH target: things the schema cannot see."""
from __future__ import annotations

from infra.stack.config import Deployment
from infra.targets.ssh.config import SshTarget
from infra.engines.registry import engine_for
from infra.errors import Problem


def ssh_checks(d: Deployment) -> list[Problem]:
    """Port clashes on the load-balancer host, runtimes that cannot serve the engine, pinned keys vs TOFU."""
    t = d.target
    if not isinstance(t, SshTarget):
        return []
    out = []
    if t.load_balancer is not None and t.load_balancer.port == d.serving.port:
        out.append(Problem("target.load_balancer.port", "the load balancer shares its host with a replica and "
                           "cannot listen on the engine's port", str(t.load_balancer.port),
                           f"use another port than serving.port ({d.serving.port})"))
    engine = engine_for(d.engine.kind)
    if t.runtime == "process" and engine.needs_auth_proxy:
        out.append(Problem("target.runtime", f"{engine.label} cannot check an API key itself and the authenticating "
                           "proxy runs only with the docker runtime", "process", "use runtime: docker"))
    if t.runtime == "process" and t.install_docker:
        out.append(Problem("target.install_docker", "has no effect with runtime: process", "true",
                           "remove it, or use runtime: docker", severity="warning"))
    if t.trust_on_first_use and all(h.host_key for h in t.hosts):
        out.append(Problem("target.trust_on_first_use", "every host pins its key; trust on first use is never used",
                           "true", "remove it", severity="warning"))
    return out
