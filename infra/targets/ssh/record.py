"""The record of processing on SSH hosts: each host's GPUs, its engine's telemetry switches and options (read
from the running process), what listens beyond loopback, the gateway's key ids and the data folders kept."""
from __future__ import annotations

import ipaddress
import json
import posixpath
import re
import shlex
from concurrent.futures import ThreadPoolExecutor

from infra.errors import InferryError
from infra.stack.config import Deployment
from infra.targets.contract import Door, ReplicaFacts, Source
from infra.targets.ssh.facts import MARK, SMI_QUERY, parse_gpus, sections
from infra.targets.ssh import pool

KEY_ID = r"sha256:[0-9a-f]{12}"
WHEN = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def facts_command(pid_cmd: str, switches: list[str], caddy_json: str, folders: list[str], ledger: str = "") -> str:
    """One read-only command; each part after its MARK line. Only the switches' names are let out of the
    engine's environment (it holds the store keys), only option names out of its argv, key ids out of Caddy's."""
    names = "|".join(re.escape(n) for n in switches) or "^$"
    # Both files are in the gateway user's folder: a link there is not followed (root reads this).
    conf, book = shlex.quote(caddy_json), shlex.quote(ledger)
    keys = (f"[ ! -L {conf} ] && grep -oE {shlex.quote(KEY_ID)} {conf} 2>/dev/null | sort -u"
            if caddy_json else "true")
    folder_list = " ".join(shlex.quote(f) for f in folders)
    return "; ".join([
        f"echo {MARK}smi", f"{SMI_QUERY} 2>&1",
        f"pid=$({pid_cmd})", f"echo {MARK}pid", "echo \"$pid\"",
        f"echo {MARK}env", f"[ -n \"$pid\" ] && tr '\\0' '\\n' < /proc/$pid/environ | grep -E '^({names})='",
        f"echo {MARK}flags",
        "[ -n \"$pid\" ] && tr '\\0' '\\n' < /proc/$pid/cmdline | grep -E '^--?[A-Za-z]' | sed 's/=.*//'",
        f"echo {MARK}listen", "ss -Hltn 2>/dev/null | awk '{print $4}'",
        f"echo {MARK}keys", keys,
        f"echo {MARK}ledger",
        f"[ -f {book} ] && [ ! -L {book} ] && cat {book}; echo" if ledger else "true",  # it may lack its last newline
        f"echo {MARK}data", f"for f in {folder_list}; do [ -e \"$f\" ] && echo \"$f\"; done", "true"])


def _public(addr: str) -> bool:
    """A listening address reachable from beyond the host (not loopback)."""
    host = addr.rsplit(":", 1)[0].strip("[]").split("%")[0]
    if host == "*":
        return True
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True


def _ledger(text: str) -> dict[str, str]:
    """The gateway's key ledger (key id -> first accepted); a file that does not parse gives no dates."""
    try:
        doc = json.loads(text) if text.strip() else {}
    except ValueError:
        return {}
    if not isinstance(doc, dict):
        return {}
    return {k: v for k, v in doc.items() if re.fullmatch(KEY_ID, str(k)) and re.fullmatch(WHEN, str(v))}


def parse_facts(source: str, place: dict[str, str], text: str) -> ReplicaFacts:
    """ReplicaFacts from what facts_command printed."""
    part = sections(text)
    added = _ledger(part.get("ledger", ""))
    gpus, smi_error = parse_gpus(part.get("smi", ""))
    env = dict(line.split("=", 1) for line in part.get("env", "").splitlines() if "=" in line)
    lines = lambda name: tuple(x for x in part.get(name, "").splitlines() if x.strip())  # noqa: E731
    pid = part.get("pid", "").strip()
    return ReplicaFacts(source, place, tuple(g.name for g in gpus), env, tuple(dict.fromkeys(lines("flags"))),
                        tuple(sorted({a for a in lines("listen") if _public(a)})),
                        {k: added.get(k, "") for k in lines("keys")}, lines("data"),
                        None if pid else "no engine process runs (not applied, stopped or destroyed)")


def replica_facts(d: Deployment, private_key: str) -> list[ReplicaFacts]:
    """Every host's facts, in host order, read in parallel."""
    from infra.engines.registry import expected_switches
    from infra.targets.ssh.plan import plan_deployment
    from infra.targets.ssh.service import built_engines

    plan = plan_deployment(d)
    switches = list(expected_switches(d))
    gw = plan.gateway

    def one(hp) -> ReplicaFacts:
        a = hp.service
        on_gateway = gw is not None and (gw.conn.address, gw.conn.port) == (a.conn.address, a.conn.port)
        folders = [a.service_dir, *(w.model_dir for w in hp.weights), *built_engines(a),
                   *([gw.plan.state_dir] if on_gateway else [])]
        place = {"address": a.conn.address, **({"gateway": "yes"} if on_gateway else {})}
        source = f"host {a.conn.label}"
        cmd = facts_command(a.rt.engine_pid(), switches, gw.conf_path if on_gateway else "", folders,
                            gw.ledger_path if on_gateway else "")
        try:
            out = pool.read(a.conn, private_key,
                            lambda s: s.run(cmd, "read the host's facts for the record", check=False)).out
        except InferryError as e:
            return ReplicaFacts(source, place, error=f"not read: {e.message}")
        return parse_facts(source, place, out)

    with ThreadPoolExecutor(max_workers=plan.max_parallel) as ex:
        return list(ex.map(one, plan.hosts))



def door(d: Deployment) -> Door:
    """The gateway as the stack sets it up; without one, every host's engine port over plain HTTP."""
    from infra.targets.ssh.plan import plan_deployment

    t, plan = d.target, plan_deployment(d)
    keys = 1 + (d.serving.previous_api_key is not None)
    g, ga = t.gateway, plan.gateway
    if g is None or ga is None:
        return Door(", ".join(hp.service.endpoint for hp in plan.hosts), "none: no gateway, plain HTTP to each host",
                    keys, (d.serving.port,), "each engine answers on its own public port")
    tls = {"acme": f"certificates issued and renewed over ACME by {g.acme.directory}",
           "certificate": "the stack's own certificate (target.gateway.certificate)",
           "off": "off: plain HTTP (target.gateway.tls: off)"}[g.tls]
    ports = (g.http_port,) if g.tls == "off" else (g.https_port, g.http_port)
    return Door(ga.endpoint, tls, keys, ports, "Caddy on the gateway host reaches each engine on that host's loopback "
                "or the others' private addresses", posixpath.join(ga.plan.state_dir, "access.log"), g.access_log_days)


def run_time_sources(d: Deployment) -> list[Source]:
    """The engine image (docker runtime), Caddy's package repository and the ACME directory (a gateway)."""
    from infra.targets.ssh.gateway import CADDY_REPO
    from infra.targets.ssh.render import ssh_spec

    t, out = d.target, []
    if t.runtime == "docker":
        out.append(Source("engine image", ssh_spec(d).image, "engine.image"))
    if t.gateway is not None:
        out.append(Source("gateway package (where Caddy is not installed yet)", CADDY_REPO, "target.gateway"))
        if t.gateway.tls == "acme":
            out.append(Source("certificate authority (sees the domain names only)", t.gateway.acme.directory,
                              "target.gateway.acme.directory"))
    return out
