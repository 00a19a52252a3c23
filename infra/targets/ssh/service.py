"""Step 3 on each host: the service's files (only when they differ), a restart only when needed, a health gate."""
from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass
from typing import Any

from infra.errors import RemoteError
from infra.targets.ssh.files import RemoteFile, differing, parse_state, state_command, upload
from infra.targets.ssh.oplog import Ops
from infra.targets.ssh.pool import Conn, session
from infra.targets.ssh.runtime import Runtime, script
from infra.targets.ssh.speccodec import from_data

DEPENDS_FILE = ".inferry-depends"  # what the service depends on beyond its files (the weights digest)


@dataclass(frozen=True)
class ServiceArgs:
    """Inputs of the service step (secret values travel separately)."""

    conn: Conn
    runtime: str  # "docker" | "process"
    name: str  # systemd unit name (docker runtime)
    service_dir: str
    files: tuple[RemoteFile, ...]  # rendered by infra.render (compose, unit, launcher, engine files)
    spec: dict[str, Any]  # the ServiceSpec as data (speccodec): env by reference, port, health paths
    health_timeout_s: int = 900
    depends: str = ""
    public_address: str = ""

    @property
    def rt(self) -> Runtime:
        """The runtime's commands."""
        return Runtime(self.runtime, self.name, self.service_dir)

    @property
    def ops_log(self) -> str:
        """The host's change log."""
        return posixpath.join(self.service_dir, "ops.log")

    @property
    def endpoint(self) -> str:
        """The OpenAI base URL of this replica."""
        return f"http://{self.public_address or self.conn.address}:{int(self.spec['port'])}/v1"


@dataclass(frozen=True)
class ServiceReport:
    """What the service step did."""

    endpoint: str
    changed: list[str]
    restarted: bool
    writes: int
    restarts: int


def desired_files(a: ServiceArgs, secret_values: dict[str, str]) -> list[RemoteFile]:
    """Every file the service owns on the host: rendered files, secret files (0600), runtime files."""
    from infra.render import render_secret_files  # the env file and auth proxy are rendered only here

    d = a.service_dir
    secret = [RemoteFile(posixpath.join(d, f.name), f.content, f.mode)
              for f in render_secret_files(from_data(a.spec), secret_values)]
    files = list(a.files) + secret + [RemoteFile(posixpath.join(d, DEPENDS_FILE), a.depends + "\n", 0o644)]
    if a.runtime == "process":
        files.append(RemoteFile(posixpath.join(d, "supervise.sh"), script("supervise.sh"), 0o755))
    return files


def ensure_service(a: ServiceArgs, private_key: str, secret_values: dict[str, str]) -> ServiceReport:
    """Converge files, restart when a dependency changed or the service is down, then wait until healthy."""
    s = session(a.conn, private_key)
    files = desired_files(a, secret_values)
    probe = s.run(f"{state_command([f.path for f in files])}; echo @@status; {a.rt.status()}", "read service state")
    state_text, _, status = probe.out.partition("@@status\n")
    change = differing(files, parse_state(state_text))
    upload(s, change, "upload service files")
    restart = bool(change) or status.strip() != "running"
    if restart:
        unit_changed = any(f.path == a.rt.unit_path for f in change)
        s.run(a.rt.restart(reload_unit=unit_changed), "restart the service", timeout=300)
    ops = Ops(writes=[f.path for f in change], restarts=int(restart))
    ops.record(s, a.ops_log, "record changes")
    wait_healthy(a, private_key, secret_values.get("serving.api_key", ""))
    return ServiceReport(a.endpoint, [f.path for f in change], restart, len(change), int(restart))


def wait_healthy(a: ServiceArgs, private_key: str, api_key: str) -> None:
    """Poll on the host until /health answers and /v1/models lists the model; else fail with the log's tail."""
    s = session(a.conn, private_key)
    sp = a.spec
    model = sp.get("served_model_name") or ""
    args = " ".join(shlex.quote(str(x)) for x in (int(sp["port"]), sp["health_path"], sp["models_path"], model,
                                                   a.health_timeout_s))
    res = s.run(f"set -- {args}; {script('health.sh')}", "health check", stdin=api_key + "\n", check=False,
                timeout=a.health_timeout_s + 60)
    if res.code == 0:
        return
    tail = s.run(a.rt.logs(40), "read the engine log", check=False).out.rstrip()
    raise RemoteError(f"the engine did not become healthy within {a.health_timeout_s}s "
                      f"({sp['health_path']} and {sp['models_path']} listing {model!r} on port {sp['port']}); "
                      f"last lines of its log:\n{_indent(tail) or '    (empty log)'}",
                      "fix the engine error shown in the log (options, GPU memory, weights), or raise "
                      "target.health_timeout_s; then apply again", where=f"host {a.conn.label}")


def _indent(text: str) -> str:
    return "\n".join("    " + ln for ln in text.splitlines())


def remove_service(a: ServiceArgs, private_key: str) -> None:
    """Destroy: stop the service, remove its files and folder (the weights cache stays)."""
    s = session(a.conn, private_key)
    paths = [f.path for f in a.files] + [posixpath.join(a.service_dir, n) for n in (DEPENDS_FILE, "supervise.sh")]
    paths += a.rt.own_files() + [a.ops_log] + secret_paths(a)
    rm = " ".join(shlex.quote(p) for p in sorted(set(paths)))
    reload = "; systemctl daemon-reload 2>/dev/null" if a.runtime == "docker" else ""
    s.run(f"{a.rt.stop()}; rm -f {rm}{reload}; rmdir {shlex.quote(a.service_dir)} 2>/dev/null; true",
          "remove the service")


def secret_paths(a: ServiceArgs) -> list[str]:
    """Where the secret-bearing files are (their names only: no values needed to remove them)."""
    from infra.render import ENV, PROXY

    return [posixpath.join(a.service_dir, n) for n in (ENV, PROXY)]
