"""The optional load balancer: nginx round-robin over the replicas, run on one of the hosts."""
from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass

from infra.errors import RemoteError
from infra.targets.ssh.files import RemoteFile, differing, parse_state, state_command, upload
from infra.targets.ssh.oplog import Ops
from infra.targets.ssh.pool import Conn, session
from infra.targets.ssh.runtime import script

NGINX = "$(command -v nginx || echo /usr/sbin/nginx)"
INSTALL_NGINX = ("command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || { export DEBIAN_FRONTEND=noninteractive; "
                 "apt-get update -qq && apt-get install -y -qq --no-install-recommends nginx-light; }")


@dataclass(frozen=True)
class LbArgs:
    """Inputs of the load-balancer step."""

    conn: Conn
    service_dir: str  # nginx's own folder (config, pid, logs, temp)
    port: int
    upstreams: tuple[str, ...]  # "address:port" of every replica
    model: str = ""
    public_address: str = ""

    @property
    def conf_path(self) -> str:
        """nginx.conf written by inferry."""
        return posixpath.join(self.service_dir, "nginx.conf")

    @property
    def endpoint(self) -> str:
        """The OpenAI base URL clients use."""
        return f"http://{self.public_address or self.conn.address}:{self.port}/v1"


@dataclass(frozen=True)
class LbReport:
    """What the load-balancer step did."""

    endpoint: str
    writes: int
    restarts: int


def nginx_conf(a: LbArgs) -> str:
    """Round robin (nginx's default) over the replicas; the Authorization header passes through unchanged.

    No replica is ever marked down (max_fails=0): nginx's passive marking held a restarted replica out for
    fail_timeout, so in a rolling update the balancer refused every request while one replica was healthy.
    A refused connection (an engine restarting or loading) fails over at once; a host that does not answer
    at all costs a request at most proxy_connect_timeout before the next replica is tried.
    """
    d = a.service_dir
    servers = "\n".join(f"    server {u} max_fails=0;" for u in a.upstreams)
    temps = "\n".join(f"  {k}_temp_path {d}/tmp/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return f"""# Written by inferry: round-robin load balancer over the replicas.
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log off;
{temps}
  upstream inferry_replicas {{
{servers}
  }}
  server {{
    listen {a.port};
    location / {{
      proxy_pass http://inferry_replicas;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 3600s;
      proxy_connect_timeout 2s;
      proxy_next_upstream error timeout http_502 http_503;
    }}
  }}
}}
"""


def _read(a: LbArgs, s) -> tuple[list[RemoteFile], bool]:
    """(the config file if it differs from the wanted one, whether nginx runs): one round trip."""
    conf = RemoteFile(a.conf_path, nginx_conf(a), 0o644)
    pid = shlex.quote(posixpath.join(a.service_dir, "nginx.pid"))
    probe = s.run(f"{state_command([conf.path])}; echo @@status; p=$(cat {pid} 2>/dev/null) && "
                  "kill -0 \"$p\" 2>/dev/null && echo running; true", "read load balancer state")
    state_text, _, status = probe.out.partition("@@status\n")
    return differing([conf], parse_state(state_text)), status.strip() == "running"


def lb_drift(a: LbArgs, private_key: str) -> list[str]:
    """What differs on the host from the last apply: the nginx config, a stopped nginx."""
    change, running = _read(a, session(a.conn, private_key))
    return [f"{f.path} changed" for f in change] + ([] if running else ["nginx is not running"])


def ensure_lb(a: LbArgs, private_key: str, api_key: str) -> LbReport:
    """Write the config when it differs, (re)load nginx when needed, then check it answers through to a replica."""
    s = session(a.conn, private_key)
    change, running = _read(a, s)
    if change or not running:
        s.run(INSTALL_NGINX, "install nginx", timeout=900)
        upload(s, change, "upload the nginx config")
        c = shlex.quote(a.conf_path)
        d = shlex.quote(a.service_dir)
        start = f"{NGINX} -s reload -c {c}" if running else f"{NGINX} -c {c}"
        s.run(f"mkdir -p {d}/tmp && {NGINX} -t -q -c {c} && {start}", "start nginx")
    ops = Ops(writes=[f.path for f in change], restarts=int(bool(change) or not running))
    ops.record(s, posixpath.join(a.service_dir, "ops.log"), "record changes")
    res = s.run(f"set -- {a.port} /health /v1/models {shlex.quote(a.model)} 60; {script('health.sh')}",
                "load balancer health check", stdin=api_key + "\n", check=False, timeout=120)
    if res.code != 0:
        tail = s.run(f"tail -n 20 {shlex.quote(a.service_dir)}/error.log 2>/dev/null; true", "read nginx log").out
        raise RemoteError(f"the load balancer on port {a.port} does not reach a healthy replica; nginx log:\n{tail}",
                          "check that the replicas' ports are reachable from this host", where=f"host {a.conn.label}")
    return LbReport(a.endpoint, len(ops.writes), ops.restarts)


def remove_lb(a: LbArgs, private_key: str) -> None:
    """Destroy: stop nginx and remove its folder."""
    pid = shlex.quote(posixpath.join(a.service_dir, "nginx.pid"))
    session(a.conn, private_key).run(
        f"p=$(cat {pid} 2>/dev/null) && kill -QUIT \"$p\" 2>/dev/null; i=0; "
        f"while [ -n \"$p\" ] && kill -0 \"$p\" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; "
        f"rm -rf {shlex.quote(a.service_dir)}", "remove the load balancer")
