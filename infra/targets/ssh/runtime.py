"""The two ways a host runs the engine: docker (compose under systemd) and process (a small supervisor)."""
from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass
from importlib import resources


def script(name: str) -> str:
    """A shell script shipped in infra/targets/ssh/scripts/."""
    return resources.files("infra.targets.ssh").joinpath("scripts", name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Runtime:
    """Shell commands that manage one service in one folder on a host."""

    kind: str  # "docker" | "process"
    name: str  # service (systemd unit) name
    service_dir: str

    @property
    def unit_path(self) -> str:
        """Where the systemd unit lives (docker runtime)."""
        return f"/etc/systemd/system/{self.name}.service"

    @property
    def log_path(self) -> str:
        """The engine's log file (process runtime)."""
        return posixpath.join(self.service_dir, "engine.log")

    def _d(self) -> str:
        return shlex.quote(self.service_dir)

    @property
    def compose_file(self) -> str:
        """The compose file infra.render writes (docker runtime)."""
        from infra.render import COMPOSE

        return shlex.quote(posixpath.join(self.service_dir, COMPOSE))

    def status(self) -> str:
        """Prints 'running' when the service is up."""
        if self.kind == "docker":
            return f"systemctl is-active --quiet {self.name} && echo running; true"
        return (f"p=$(cat {self._d()}/supervisor.pid 2>/dev/null) && kill -0 \"$p\" 2>/dev/null "
                "&& echo running; true")

    def stop(self) -> str:
        """Stops the service and waits until it is gone."""
        if self.kind == "docker":
            return (f"if [ -f {self.unit_path} ]; then systemctl disable --now {self.name} >/dev/null 2>&1; fi; "
                    f"if [ -f {self.compose_file} ]; then docker compose -f {self.compose_file} "
                    "down --remove-orphans >/dev/null 2>&1; fi; true")
        return (f"p=$(cat {self._d()}/supervisor.pid 2>/dev/null); "
                "if [ -n \"$p\" ] && kill -0 \"$p\" 2>/dev/null; then kill -TERM -\"$p\" 2>/dev/null; "
                "i=0; while kill -0 -\"$p\" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; "
                "kill -KILL -\"$p\" 2>/dev/null; fi; "
                f"rm -f {self._d()}/supervisor.pid; true")

    def restart(self, reload_unit: bool = True) -> str:
        """Stops, then starts the service in the background (returns at once)."""
        if self.kind == "docker":
            reload = "systemctl daemon-reload && " if reload_unit else ""
            return f"{reload}systemctl enable {self.name} >/dev/null 2>&1 && systemctl restart {self.name}"
        log = shlex.quote(self.log_path)
        return (f"{self.stop()}; cd {self._d()} || exit 1; [ ! -f {log} ] || mv -f {log} {log}.1; "
                "(setsid sh ./supervise.sh </dev/null >/dev/null 2>&1 &); "
                f"i=0; while [ ! -s {self._d()}/supervisor.pid ] && [ $i -lt 50 ]; do sleep 0.05; i=$((i+1)); done")

    def logs(self, lines: int = 40) -> str:
        """Prints the last lines of the engine's log."""
        if self.kind == "docker":
            return (f"journalctl -u {self.name} -n {lines} --no-pager 2>/dev/null; "
                    f"docker compose -f {self.compose_file} logs --no-color --tail {lines} 2>/dev/null; true")
        return f"tail -n {lines} {shlex.quote(self.log_path)} 2>/dev/null; true"

    def own_files(self) -> list[str]:
        """Files the runtime itself owns (removed on destroy)."""
        if self.kind == "docker":
            return [self.unit_path]
        d = self.service_dir
        return [posixpath.join(d, n) for n in ("supervise.sh", "engine.log", "engine.log.1", "supervisor.pid")]

