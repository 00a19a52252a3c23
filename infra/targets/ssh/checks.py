"""`inferry validate` checks for the SSH target: things the schema cannot see."""
from __future__ import annotations

from infra.stack.config import Deployment
from infra.targets.ssh.config import SshTarget
from infra.engines.registry import engine_for
from infra.errors import Problem


def ssh_checks(d: Deployment) -> list[Problem]:
    """The gateway's placement, runtimes that cannot serve the engine, pinned keys vs TOFU."""
    t = d.target
    if not isinstance(t, SshTarget):
        return []
    out = []
    engine = engine_for(d.engine.kind)
    out += gateway_checks(d, t)
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


# Networks only a private network reaches (RFC 1918, CGNAT, unique local); Python's is_private also counts the
# documentation ranges, which stand for public addresses in examples.
PRIVATE_NETS = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")


def _public(address: str) -> bool:
    import ipaddress

    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return True  # a DNS name: assume the internet can reach it
    private = any(ip in ipaddress.ip_network(n) for n in PRIVATE_NETS if ipaddress.ip_network(n).version == ip.version)
    return not (private or ip.is_loopback or ip.is_link_local)


def gateway_checks(d: Deployment, t: SshTarget) -> list[Problem]:
    """Where the gateway runs: ports free on its host, a private address for every other host's engine."""
    g, gh = t.gateway, t.gateway_host
    if g is None or gh is None:
        return []
    out = []
    ports = {g.port} | ({g.http_port} if g.tls != "off" else set())
    if d.serving.port in ports:
        out.append(Problem("serving.port", f"the gateway listens on {d.serving.port} on host {gh.label}, where "
                           "a replica's engine listens too", str(d.serving.port),
                           "use another engine port, e.g. 8000"))
    for i, h in enumerate(t.hosts):
        if h is not gh and not h.private_address:
            out.append(Problem(f"target.hosts[{i}].private_address", f"the gateway on {gh.label} reaches "
                               f"host {h.label}'s engine, which must not listen on its public address", None,
                               "give the host's address on the private network the gateway host shares"))
    if g.tls == "off" and _public(gh.address):
        out.append(Problem("target.gateway.tls", f"plain HTTP on {gh.address}, a public address: API keys and "
                           "prompts cross the internet in clear", "off",
                           "give domains (HTTPS from Let's Encrypt) or tls: certificate", severity="warning"))
    return out
