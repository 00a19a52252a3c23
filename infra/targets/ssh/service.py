"""Step 3 on each host: the service's files (only when they differ), a restart only when needed, a health gate."""
from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass
from typing import Any

from infra.stack.secretfix import SecretField
from infra.errors import RemoteError
from infra.targets.ssh.files import RemoteFile, differing, parse_state, state_command, upload
from infra.targets.ssh.oplog import Ops
from infra.targets.ssh import pool
from infra.targets.ssh.pool import Conn, session
from infra.targets.ssh.rollback import Changeset, backup_command, drop_command, prev_path, restore_command
from infra.targets.ssh.rollout import Rollout
from infra.targets.ssh.runtime import Runtime, images_command, script
from infra.targets.ssh.session import Session
from infra.targets.ssh.speccodec import from_data

DEPENDS_FILE = ".inferry-depends"  # what the service depends on beyond its files (the weights digest)


@dataclass(frozen=True)
class ServiceArgs:
    """Inputs of the service step (secret values travel separately)."""

    conn: Conn
    runtime: str  # "docker" | "process"
    service_dir: str
    files: tuple[RemoteFile, ...]  # rendered by infra.targets.ssh.render (compose, unit, launcher, engine files)
    spec: dict[str, Any]  # the ServiceSpec as data (speccodec): env by reference, port, health paths
    health_timeout_s: int = 900
    depends: str = ""
    public_address: str = ""
    bind: str = ""  # the one address the engine listens on (behind a gateway); "" = every address

    @property
    def local_base(self) -> str:
        """The engine's URL from its own host."""
        return f"http://{self.bind or '127.0.0.1'}:{int(self.spec['port'])}"

    @property
    def rt(self) -> Runtime:
        """The runtime's commands."""
        return Runtime(self.runtime, self.service_dir)

    @property
    def ops_log(self) -> str:
        """The host's change log."""
        return posixpath.join(self.service_dir, "ops.log")

    @property
    def endpoint(self) -> str:
        """The OpenAI base URL of this replica."""
        return f"http://{self.bind or self.public_address or self.conn.address}:{int(self.spec['port'])}/v1"


@dataclass(frozen=True)
class ServiceReport:
    """What the service step did."""

    endpoint: str
    changed: list[str]
    restarted: bool
    writes: int
    restarts: int


def plain_files(a: ServiceArgs) -> list[RemoteFile]:
    """The service's files whose content is known without secrets: rendered files, the dependency marker,
    the runtime's own files."""
    files = list(a.files) + [RemoteFile(posixpath.join(a.service_dir, DEPENDS_FILE), a.depends + "\n", 0o644)]
    if a.runtime == "process":
        files.append(RemoteFile(posixpath.join(a.service_dir, "supervise.sh"), script("supervise.sh"), 0o755))
    return files


def desired_files(a: ServiceArgs, secret_values: dict[str, str]) -> list[RemoteFile]:
    """Every file the service owns on the host: plain_files and the secret files (0600)."""
    from infra.targets.ssh.render import render_secret_files  # the env file and auth proxy are rendered only here

    secret = [RemoteFile(posixpath.join(a.service_dir, f.name), f.content, f.mode)
              for f in render_secret_files(from_data(a.spec), secret_values)]
    return plain_files(a) + secret


@dataclass(frozen=True)
class Pending:
    """What an apply is about to do on one host, read before anything there changes."""

    a: ServiceArgs
    files: list[RemoteFile]
    state: dict[str, tuple[int, str]]
    running: bool
    change: list[RemoteFile]

    @property
    def unfinished(self) -> bool:
        """Whether an earlier apply wrote files and never reached its healthy end (its kept copies are still
        there): the engine that runs may predate the files (say, Docker restarted the old container after the
        daemon restarted mid-update), so it restarts even when no file differs now."""
        return any(prev_path(f.path) in self.state for f in self.files)

    @property
    def restart(self) -> bool:
        """Whether the engine (re)starts in this apply."""
        return bool(self.change) or not self.running or self.unfinished

    @property
    def restarts_serving(self) -> bool:
        """Whether a running engine would restart: a rolling change takes its turn for these only."""
        return self.running and self.restart


def check_service(a: ServiceArgs, private_key: str, secret_values: dict[str, str]) -> Pending:
    """Read-only: what differs on the host, and the images a restart will need (pulled now if missing)."""
    s = session(a.conn, private_key)
    files = desired_files(a, secret_values)
    state, running = read_state(a, s, [f.path for f in files])
    p = Pending(a, files, state, running, differing(files, state))
    if p.restart:
        ensure_images(a, s)  # before anything is written or stopped: a missing image changes nothing
    return p


def ensure_service(a: ServiceArgs, private_key: str, secret_values: dict[str, str],
                   rollout: Rollout | None = None) -> ServiceReport:
    """Converge files, restart when a dependency changed or the service is down, then wait until healthy.

    With a rollout (infra.targets.ssh.rollout), restarting a serving engine waits for its turn; reads, health
    gates of unchanged hosts and first starts do not.
    """
    p = check_service(a, private_key, secret_values)
    if rollout is None or not p.restarts_serving:
        return converge_service(p, private_key, secret_values)
    with rollout.turn(a.conn.label):
        return converge_service(p, private_key, secret_values)


def converge_service(p: Pending, private_key: str, secret_values: dict[str, str]) -> ServiceReport:
    """Write what differs, restart when needed, health gate.

    The files an update replaces are kept as .inferry-prev until the engine is healthy; if it is not, the
    previous files come back (update) or the service is removed (create): nothing is left half-applied.
    """
    a, state, change = p.a, p.state, p.change
    s = session(a.conn, private_key)
    paths = [f.path for f in p.files]
    cs, written = Changeset.of(change, p.files, state), [f.path for f in change]
    if cs.replaced:
        s.run(backup_command(cs.replaced), "keep the previous service files")
    upload(s, change, "upload service files")
    restart = p.restart
    if restart:
        _restart(a, s)
    Ops(writes=written, restarts=int(restart)).record(s, a.ops_log, "record changes")
    api_key = secret_values.get(SecretField.API_KEY, "")
    tail = health_failure(a, private_key, api_key)
    if tail is not None:
        raise undo(a, private_key, api_key, cs, tail)
    kept = [path for path in paths if prev_path(path) in state or path in cs.replaced]
    if kept:
        s.run(drop_command(kept), "remove the previous service files")
    return ServiceReport(a.endpoint, written, restart, len(written), int(restart))


def service_drift(a: ServiceArgs, private_key: str) -> list[str]:
    """What differs on the host from the last apply: changed or missing files, a stopped service.

    Secret-bearing files (the env file, the proxy config) are left out: their content is not in state.
    """
    files = plain_files(a)
    state, running = pool.read(a.conn, private_key, lambda s: read_state(a, s, [f.path for f in files]))
    drift = [f"{f.path} {'changed' if f.path in state else 'missing'}" for f in differing(files, state)]
    return drift + ([] if running else ["the engine service is not running"])


def ensure_images(a: ServiceArgs, s: Session) -> None:
    """docker: every image the compose file runs is on the host, pulled now if it is not."""
    if a.runtime != "docker":
        return
    from infra.engines.spec import PROXY_IMAGE

    spec = from_data(a.spec)
    images = [spec.image] + ([PROXY_IMAGE] if spec.needs_auth_proxy else [])
    res = s.run(images_command(images), "check the engine's images", check=False, timeout=3600)
    if res.code == 0:
        return
    head, _, said = res.out.partition("\n")
    image = head.removeprefix("missing ").strip()
    what = "engine.image" if image == spec.image else "the auth proxy's image"
    raise RemoteError(f"image {image} ({what}) is not on the host and could not be pulled; Docker said: "
                      f"{(said.strip() or res.err.strip())[-400:]}\nnothing was changed on the host",
                      "make the registry reachable from the host (`docker login` for a private one), or load the "
                      "image there (`docker load`), or set engine.image to an image the host has; then apply again",
                      where=f"host {a.conn.label}")


def read_state(a: ServiceArgs, s: Session, paths: list[str]) -> tuple[dict[str, tuple[int, str]], bool]:
    """One round trip: mode and hash of every file and of its kept copy, and whether the service runs."""
    probe = s.run(f"{state_command(paths + [prev_path(p) for p in paths])}; echo @@status; {a.rt.status()}",
                  "read service state")
    state_text, _, status = probe.out.partition("@@status\n")
    return parse_state(state_text), status.strip() == "running"


def _restart(a: ServiceArgs, s: Session) -> None:
    s.run(a.rt.restart(), "restart the service", timeout=300)


def health_failure(a: ServiceArgs, private_key: str, api_key: str) -> str | None:
    """Poll on the host until /health answers and /v1/models lists the model: None, else the log's last lines."""
    s = session(a.conn, private_key)
    sp = a.spec
    args = " ".join(shlex.quote(str(x)) for x in (a.local_base, sp["health_path"], sp["models_path"],
                                                   sp.get("served_model_name") or "", a.health_timeout_s))
    res = s.run(f"set -- {args}; {script('health.sh')}", "health check", stdin=api_key + "\n", check=False,
                timeout=a.health_timeout_s + 60)
    if res.code == 0:
        return None
    return s.run(a.rt.logs(40), "read the engine log", check=False).out.rstrip()


def undo(a: ServiceArgs, private_key: str, api_key: str, cs: Changeset, tail: str) -> RemoteError:
    """Take back what this apply did on an unhealthy engine; the error says what the host runs now."""
    if cs.fresh:
        remove_service(a, private_key)
        return unhealthy(a, tail, "nothing was left running: the service was stopped and the files it wrote "
                                  "were removed (the weights stay)")
    if not cs.paths:
        return unhealthy(a, tail, "")
    try:
        s = session(a.conn, private_key)
        s.run(restore_command(cs), "restore the previous service files")
        _restart(a, s)
        Ops(writes=cs.paths, restarts=1).record(s, a.ops_log, "record changes")
        again = health_failure(a, private_key, api_key)
    except RemoteError as e:
        again = e.render()
    if again is None:
        return unhealthy(a, tail, "the previous configuration was restored and is serving again")
    return unhealthy(a, tail, "restoring the previous configuration failed too; last lines of its log:\n"
                              f"{_indent(again) or '    (empty log)'}")


def unhealthy(a: ServiceArgs, tail: str, outcome: str) -> RemoteError:
    """The health gate's error: what was expected, the failed engine's log, what the host runs now."""
    sp = a.spec
    model = sp.get("served_model_name") or ""
    return RemoteError(f"the engine did not become healthy within {a.health_timeout_s}s "
                       f"({sp['health_path']} and {sp['models_path']} listing {model!r} on port {sp['port']}); "
                       f"last lines of its log:\n{_indent(tail) or '    (empty log)'}"
                       + (f"\n{outcome}" if outcome else ""),
                       "fix the engine error shown in the log (options, GPU memory, weights), or raise "
                       "target.health_timeout_s; then apply again", where=f"host {a.conn.label}")


def _indent(text: str) -> str:
    return "\n".join("    " + ln for ln in text.splitlines())


def remove_service(a: ServiceArgs, private_key: str) -> None:
    """Destroy: stop the service, remove its files, its caches, a built TensorRT engine and its folder (the
    weights step removes the weights)."""
    s = session(a.conn, private_key)
    paths = [f.path for f in a.files] + [posixpath.join(a.service_dir, n) for n in (DEPENDS_FILE, "supervise.sh")]
    paths += a.rt.own_files() + [a.ops_log] + secret_paths(a)
    paths += [prev_path(p) for p in paths]  # copies an interrupted update may have left
    rm = " ".join(shlex.quote(p) for p in sorted(set(paths)))
    folders = a.rt.own_folders() + built_engines(a)
    rm_rf = f"rm -rf {' '.join(shlex.quote(p) for p in folders)}; " if folders else ""
    # rmdir removes a folder only when it is empty: one the user keeps other files in stays.
    empty = " ".join(shlex.quote(p) for p in [a.service_dir, *map(posixpath.dirname, built_engines(a))])
    s.run(f"{a.rt.stop()}; rm -f {rm}; {rm_rf}rmdir {empty} 2>/dev/null; true", "remove the service")


def built_engines(a: ServiceArgs) -> list[str]:
    """The TensorRT engine folder the engine reads on the host (a GPU-specific build of the weights)."""
    from infra.targets.ssh.render import ENGINES_HOST_DIR

    build = a.spec.get("build")
    if not build:
        return []
    return [posixpath.join(ENGINES_HOST_DIR, posixpath.basename(str(build["output_dir"]).rstrip("/")))]


def secret_paths(a: ServiceArgs) -> list[str]:
    """Where the secret-bearing files are (their names only: no values needed to remove them)."""
    from infra.targets.ssh.render import ENV, PROXY

    return [posixpath.join(a.service_dir, n) for n in (ENV, PROXY)]
