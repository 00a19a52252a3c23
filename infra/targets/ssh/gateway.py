"""The gateway step: Caddy on one host, the deployment's only public listener (infra/gateway/caddy.py).

Reads the host first (the config's hash, whether Caddy runs), writes the config only when it differs, reloads a
running Caddy gracefully (open streams finish) or starts it, then checks a request through it reaches a replica.
The config holds the keys: it is written 0600 into a 0700 folder, and its hash, never its content, is recorded.
"""
from __future__ import annotations

import json
import posixpath
import shlex
from dataclasses import dataclass

from infra.errors import RemoteError, SecretError
from infra.stack.secretfix import SecretField
from infra.stack.secrets import checked_edge_key
from infra.gateway.caddy import GatewayPlan, GatewaySecrets, caddy_json, key_id, utc_text
from infra.targets.ssh.files import RemoteFile, differing, parse_state, state_command, upload
from infra.targets.ssh.oplog import Ops
from infra.targets.ssh import pool
from infra.targets.ssh.pool import Conn, session
from infra.targets.ssh.runtime import script

CADDY = "$(command -v caddy || echo /usr/bin/caddy)"
# Caddy faces the internet, so it is not root: its own system user, holding only the capability that binds ports
# 80 and 443 (ambient: kept across exec), with no way to gain another. setpriv is util-linux's, useradd passwd's:
# both are in every Debian and Ubuntu.
USER = "inferry-gateway"
ADD_USER = (f"id -u {USER} >/dev/null 2>&1 || useradd --system --user-group --no-create-home "
            f"--home-dir /nonexistent --shell /usr/sbin/nologin {USER}")
AS_USER = (f"setpriv --reuid={USER} --regid={USER} --clear-groups --inh-caps=+net_bind_service "
           "--ambient-caps=+net_bind_service --bounding-set=-all,+net_bind_service --no-new-privs")
# Caddy's own Debian repository (https://caddyserver.com/docs/install#debian-ubuntu-raspbian); its package
# starts a caddy.service of its own on port 80, which inferry's gateway replaces: it is stopped and disabled.
CADDY_REPO = "https://dl.cloudsmith.io/public/caddy/stable"
INSTALL_CADDY = (
    "command -v caddy >/dev/null || [ -x /usr/bin/caddy ] || { export DEBIAN_FRONTEND=noninteractive; "
    "apt-get update -qq && apt-get install -y -qq --no-install-recommends debian-keyring debian-archive-keyring "
    "apt-transport-https curl gnupg && curl -1sLf " + CADDY_REPO + "/gpg.key | "
    "gpg --dearmor --yes -o /usr/share/keyrings/caddy-stable-archive-keyring.gpg && "
    "curl -1sLf " + CADDY_REPO + "/debian.deb.txt > "
    "/etc/apt/sources.list.d/caddy-stable.list && apt-get update -qq && apt-get install -y -qq caddy && "
    "{ systemctl disable --now caddy 2>/dev/null || true; }; }")


@dataclass(frozen=True)
class GatewayArgs:
    """Inputs of the gateway step (secret values travel separately)."""

    conn: Conn
    plan: GatewayPlan
    model: str = ""
    public_address: str = ""

    @property
    def conf_path(self) -> str:
        """The config Caddy runs (0600: it holds the keys)."""
        return posixpath.join(self.plan.state_dir, "caddy.json")

    @property
    def ledger_path(self) -> str:
        """The key ids the gateway accepts and when each was first accepted (key_ledger)."""
        return posixpath.join(self.plan.state_dir, "keys.json")

    @property
    def pid_path(self) -> str:
        """Caddy's pid file."""
        return posixpath.join(self.plan.state_dir, "caddy.pid")

    @property
    def name(self) -> str:
        """The name clients use: the first domain, else the host's address."""
        return self.plan.domains[0] if self.plan.domains else (self.public_address or self.conn.address)

    @property
    def endpoint(self) -> str:
        """The OpenAI base URL clients use."""
        p = self.plan
        scheme, default = ("http", 80) if p.tls == "off" else ("https", 443)
        port = "" if p.port == default else f":{p.port}"
        return f"{scheme}://{self.name}{port}/v1"


@dataclass(frozen=True)
class GatewayReport:
    """What the gateway step did."""

    endpoint: str
    config_sha256: str
    writes: int
    restarts: int


def key_ledger(old_text: str, keys: tuple[str, ...], now: str) -> str:
    """The ledger of the keys the gateway accepts: each key's id and when it was first accepted (kept from the
    old ledger for a key still there; `now` for a new one). Ids only, never keys (the record reads it)."""
    try:
        old = json.loads(old_text) if old_text.strip() else {}
    except ValueError:
        old = {}
    old = old if isinstance(old, dict) else {}
    return json.dumps({k: str(old.get(k) or now) for k in (key_id(x) for x in keys)}, indent=1) + "\n"


def _files(a: GatewayArgs, sec: GatewaySecrets, ledger_text: str = "") -> list[RemoteFile]:
    now = utc_text()
    files = [RemoteFile(a.conf_path, caddy_json(a.plan, sec), 0o600),
             RemoteFile(a.ledger_path, key_ledger(ledger_text, sec.api_keys, now), 0o600)]
    if a.plan.acme_ca_root:
        files.append(RemoteFile(a.plan.ca_root_path, a.plan.acme_ca_root, 0o644))
    return files


def _read(a: GatewayArgs, s, files: list[str]) -> tuple[dict, str, str]:
    """({path: (mode, sha256)}, Caddy's status, the key ledger's text): one round trip. The status is running,
    stopped, replaced (running from a binary that is no longer the installed one: a new build was installed
    since it started, which a reload would not load) or root (run as another user than USER: root, as an inferry
    before USER started it)."""
    ledger = shlex.quote(a.ledger_path)
    probe = s.run(f"{state_command(files)}; echo @@status; {_our_pid(a)}; if [ -z \"$p\" ]; then echo stopped; "
                  f"elif [ \"$(readlink /proc/$p/exe)\" != \"$(readlink -f {CADDY})\" ]; then echo replaced; "
                  f"elif [ \"$(stat -c %U /proc/$p)\" != {USER} ]; then echo root; else echo running; fi; "
                  f"echo @@ledger; [ -f {ledger} ] && [ ! -L {ledger} ] && cat {ledger}; true", "read gateway state")
    state_text, _, rest = probe.out.partition("@@status\n")
    status, _, ledger_text = rest.partition("@@ledger\n")
    return parse_state(state_text), status.strip() or "stopped", ledger_text


def _our_pid(a: GatewayArgs) -> str:
    """Shell: p is the pid in Caddy's pid file if that process is a Caddy, else empty. The file is in the gateway
    user's folder: its word alone must never make root signal another process."""
    return (f"p=$(cat {shlex.quote(a.pid_path)} 2>/dev/null); case \"$p\" in ''|*[!0-9]*) p= ;; esac; "
            "case \"$(readlink /proc/${p:-0}/exe 2>/dev/null)\" in */caddy|*'/caddy (deleted)') ;; *) p= ;; esac")


def gateway_drift(a: GatewayArgs, private_key: str, config_sha256: str) -> list[str]:
    """What differs on the host from the last apply: the config (by its recorded hash), a stopped Caddy."""
    state, status, _ = pool.read(a.conn, private_key, lambda s: _read(a, s, [a.conf_path]))
    out = [] if state.get(a.conf_path) == (0o600, config_sha256) else [f"{a.conf_path} changed"]
    if status == "replaced":
        out.append("the gateway (caddy) runs a binary replaced since it started")
    if status == "root":
        out.append(f"the gateway (caddy) does not run as its user {USER}")
    return out + ([] if status != "stopped" else ["the gateway (caddy) is not running"])


def _start(a: GatewayArgs, running: bool) -> str:
    """Reload the running Caddy, or start it; as its user, so that nothing in its folder is opened as root."""
    c, d = shlex.quote(a.conf_path), shlex.quote(a.plan.state_dir)
    # `caddy start` waits until the new process runs its config; its output goes to a file, not to this
    # session (the daemon would hold the channel open). A reload is graceful: streams in flight finish.
    if running:
        return f"{_as_user(a)} {CADDY} reload --config {c} --address unix/{shlex.quote(a.plan.admin_socket)}"
    start = f"exec {CADDY} start --config {c} --pidfile {shlex.quote(a.pid_path)} >{d}/start.log 2>&1 </dev/null"
    return f"{_as_user(a)} sh -c {shlex.quote(start)} || {{ {AS_USER} tail -n 20 {d}/start.log >&2; exit 1; }}"


def _hand_over(a: GatewayArgs) -> str:
    """Its user owns the folder and all in it (certificates and logs a root Caddy made before included), and can
    reach it: a folder above closed to other users is named, with the fix."""
    d = shlex.quote(a.plan.state_dir)
    why = (f"the gateway's user {USER} cannot reach {a.plan.state_dir}: a folder above it is closed to other users; "
           "open it (chmod o+x) or set target.service_dir to a folder under one that is")
    return f"chown -R {USER}:{USER} {d} && {{ {AS_USER} test -x {d} || {{ echo {shlex.quote(why)} >&2; exit 1; }}; }}"


def _as_user(a: GatewayArgs) -> str:
    """Run as the gateway's user, its home its own folder (root's is not readable to it)."""
    d = a.plan.state_dir
    return f"{AS_USER} env HOME={shlex.quote(d)} XDG_CONFIG_HOME={shlex.quote(d)} XDG_DATA_HOME={shlex.quote(d)}"


def ensure_gateway(a: GatewayArgs, private_key: str, sec: GatewaySecrets) -> GatewayReport:
    """Write the config when it differs, reload or start Caddy when needed, then check it reaches a replica."""
    s = session(a.conn, private_key)
    state, status, ledger = _read(a, s, [a.conf_path, a.ledger_path, a.plan.ca_root_path])
    want = _files(a, sec, ledger)
    change = differing(want, state)
    if status in ("replaced", "root"):  # a new Caddy build, or one run as root: only a new process fixes it
        _stop(a, s)
    running = status == "running"
    if change or not running:
        d, up = shlex.quote(a.plan.state_dir), shlex.quote(posixpath.dirname(a.plan.state_dir))
        s.run(INSTALL_CADDY, "install caddy", timeout=900)
        # The folders above it as the host makes folders (its user must pass through them); its own private.
        s.run(f"{ADD_USER} && mkdir -p {up} && umask 077 && mkdir -p {d} && chmod 700 {d}",
              "make the gateway's user and folder")
        upload(s, change, "upload the gateway config")
        s.run(_hand_over(a), "hand the gateway folder to its user")
        # As its user: a validate as root would create the log files Caddy then could not open.
        s.run(f"{_as_user(a)} {CADDY} validate --config {shlex.quote(a.conf_path)} >/dev/null",
              "check the gateway config")
        s.run(_start(a, running), "start the gateway", timeout=120)
    ops = Ops(writes=[f.path for f in change], restarts=int(not running))
    if ops.writes or ops.restarts:  # its log is in the user's folder: appended to as the user
        s.run(f"{AS_USER} sh -c {shlex.quote(ops.command(posixpath.join(a.plan.state_dir, 'ops.log')))}",
              "record changes")
    _health(a, s, sec.api_keys[0])
    return GatewayReport(a.endpoint, want[0].sha256, len(ops.writes), ops.restarts)


def _health(a: GatewayArgs, s, api_key: str) -> None:
    """A request through the gateway on its host reaches a replica that lists the model (TLS not verified
    here: the certificate may still be on its way from the CA; the loop waits for a handshake)."""
    p = a.plan
    scheme = "http" if p.tls == "off" else "https"
    base = f"{scheme}://{a.name}:{p.port}"
    curl = f"-k --resolve {a.name}:{p.port}:127.0.0.1" if p.tls != "off" else f"--resolve {a.name}:{p.port}:127.0.0.1"
    args = " ".join(shlex.quote(x) for x in (base, "/health", "/v1/models", a.model, "120"))
    res = s.run(f"set -- {args} {curl}; {script('health.sh')}", "gateway health check", stdin=api_key + "\n",
                check=False, timeout=180)
    if res.code != 0:
        tail = s.run(f"{AS_USER} tail -n 20 {shlex.quote(p.state_dir)}/caddy.log 2>/dev/null; true",
                     "read gateway log").out
        raise RemoteError(f"the gateway on port {p.port} does not reach a healthy replica; its log:\n{tail}",
                          "check that the replicas' engines answer on their private addresses, and for ACME that "
                          "each domain resolves to this host and ports 80 and 443 are open to the CA",
                          where=f"host {a.conn.label}")


def _stop(a: GatewayArgs, s, then: str = "true") -> None:
    """Stop Caddy (SIGTERM: it finishes what is in flight, up to 10 s), then run THEN."""
    s.run(f"{_our_pid(a)}; [ -n \"$p\" ] && kill -TERM \"$p\" 2>/dev/null; i=0; "
          f"while [ -n \"$p\" ] && kill -0 \"$p\" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; "
          f"{then}", "stop the gateway")


def remove_gateway(a: GatewayArgs, private_key: str) -> None:
    """Destroy: stop Caddy, remove its folder (config, certificates, ACME account, logs) and its user (unless
    something else runs as it)."""
    _stop(a, session(a.conn, private_key), f"rm -rf {shlex.quote(a.plan.state_dir)}; "
          f"pgrep -u {USER} >/dev/null 2>&1 || userdel {USER} 2>/dev/null; true")


def gateway_secrets(values: dict[str, str]) -> GatewaySecrets:
    """The gateway's secrets from the stack's resolved values (by field path), every key checked for the edge."""
    keys = tuple(checked_edge_key(values[f], f) for f in (SecretField.API_KEY, SecretField.PREVIOUS_API_KEY)
                 if values.get(f))
    if not keys:
        raise SecretError("no value for serving.api_key", "resolve it before the gateway step", where="gateway")
    return GatewaySecrets(keys, values.get(SecretField.GATEWAY_CERT_KEY, ""),
                          values.get(SecretField.GATEWAY_EAB_HMAC, ""))
