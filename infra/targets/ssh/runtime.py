"""The two ways a host runs the engine: docker (the compose project, kept up by Docker's restart policy) and
process (the engine's command line under a small supervisor, for hosts without Docker)."""
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
    service_dir: str

    @property
    def log_path(self) -> str:
        """The engine's log file (process runtime)."""
        return posixpath.join(self.service_dir, "engine.log")

    def _d(self) -> str:
        return shlex.quote(self.service_dir)

    @property
    def compose_file(self) -> str:
        """The compose file infra.targets.ssh.render writes (docker runtime), quoted for the shell."""
        from infra.targets.ssh.render import COMPOSE

        return shlex.quote(posixpath.join(self.service_dir, COMPOSE))

    def _compose(self, args: str) -> str:
        return f"docker compose -f {self.compose_file} {args}"

    def status(self) -> str:
        """Prints 'running' when the service is up (docker: every service of the project runs)."""
        if self.kind == "docker":
            return (f"[ -f {self.compose_file} ] && n=$({self._compose('config --services')} 2>/dev/null | wc -l) && "
                    f"[ \"$n\" -gt 0 ] && [ \"$({self._compose('ps -q --status running')} 2>/dev/null | wc -l)\" "
                    "= \"$n\" ] && echo running; true")
        return (f"p=$(cat {self._d()}/supervisor.pid 2>/dev/null) && kill -0 \"$p\" 2>/dev/null "
                "&& echo running; true")

    def stop(self) -> str:
        """Stops the service and waits until it is gone."""
        if self.kind == "docker":
            return (f"if [ -f {self.compose_file} ]; then {self._compose('down --remove-orphans')} >/dev/null 2>&1; "
                    "fi; true")
        return (f"p=$(cat {self._d()}/supervisor.pid 2>/dev/null); "
                "if [ -n \"$p\" ] && kill -0 \"$p\" 2>/dev/null; then kill -TERM -\"$p\" 2>/dev/null; "
                "i=0; while kill -0 -\"$p\" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; "
                "kill -KILL -\"$p\" 2>/dev/null; fi; "
                f"rm -f {self._d()}/supervisor.pid; true")

    def restart(self) -> str:
        """(Re)creates the service and returns once it is started (not yet healthy).

        docker: every container of the project is recreated from the files as they are now, with the images
        already on the host (ensure_images ran first); Docker's `restart: unless-stopped` then restarts a
        crashed engine and starts it again when the host boots.
        """
        if self.kind == "docker":
            return f"{LEGACY_UNIT}; {self._compose('up -d --force-recreate --remove-orphans --pull never 2>&1')}"
        log = shlex.quote(self.log_path)
        return (f"{self.stop()}; cd {self._d()} || exit 1; [ ! -f {log} ] || mv -f {log} {log}.1; "
                "(setsid sh ./supervise.sh </dev/null >/dev/null 2>&1 &); "
                f"i=0; while [ ! -s {self._d()}/supervisor.pid ] && [ $i -lt 50 ]; do sleep 0.05; i=$((i+1)); done")

    def logs(self, lines: int = 40) -> str:
        """Prints the last lines of the engine's log."""
        if self.kind == "docker":
            return f"{self._compose(f'logs --no-color --tail {int(lines)} engine')} 2>&1; true"
        return f"tail -n {lines} {shlex.quote(self.log_path)} 2>/dev/null; true"

    def state(self) -> str:
        """Prints 'STATUS RESTARTS STARTED_AT' of the engine since it was last (re)created by an apply:
        Docker's view of its container, or the supervisor's count of starts in the engine log."""
        if self.kind == "docker":
            return (f"c=$({self._compose('ps -aq engine')} 2>/dev/null | head -n 1); [ -n \"$c\" ] && docker inspect "
                    "--format '{{.State.Status}} {{.RestartCount}} {{.State.StartedAt}}' \"$c\"; true")
        log = shlex.quote(self.log_path)
        return (f"starts=$(grep '^inferry-supervisor: start' {log} 2>/dev/null); n=$(printf '%s' \"$starts\" | grep -c .); "
                f"s=stopped; ( {self.status()} ) | grep -q running && s=running; "
                "echo \"$s $(( n > 0 ? n - 1 : 0 )) $(printf '%s' \"$starts\" | tail -n 1 | awk '{print $NF}')\"")

    def engine_pid(self) -> str:
        """Prints the host PID of the engine process itself (its /proc/PID has its environment and argv):
        the container's first process, or the supervisor's child that is not its restart pause."""
        if self.kind == "docker":
            return (f"c=$({self._compose('ps -q engine')} 2>/dev/null | head -n 1); [ -n \"$c\" ] && "
                    "docker inspect --format '{{.State.Pid}}' \"$c\"; true")
        return (f"p=$(cat {self._d()}/supervisor.pid 2>/dev/null) && for s in /proc/[0-9]*/stat; do "
                "r=$(sed 's/.*) //' \"$s\" 2>/dev/null) || continue; set -- $r; d=${s%/stat}; "
                "[ \"$2\" = \"$p\" ] && ! grep -q '^sleep' \"$d/cmdline\" 2>/dev/null && { echo \"${d#/proc/}\"; "
                "break; }; done; true")

    def own_folders(self) -> list[str]:
        """Folders the runtime itself fills (removed whole on destroy): a bare process's caches."""
        from infra.targets.ssh.render import CACHE

        return [] if self.kind == "docker" else [posixpath.join(self.service_dir, CACHE)]

    def own_files(self) -> list[str]:
        """Files the runtime itself owns (removed on destroy)."""
        if self.kind == "docker":
            return []
        d = self.service_dir
        return [posixpath.join(d, n) for n in ("supervise.sh", "engine.log", "engine.log.1", "supervisor.pid")]


# inferry before 0.2 ran compose under a systemd unit: take it down once, Docker's restart policy replaces it.
LEGACY_UNIT = ("u=/etc/systemd/system/inferry-engine.service; if [ -f $u ]; then systemctl disable --now "
               "inferry-engine >/dev/null 2>&1; rm -f $u; systemctl daemon-reload 2>/dev/null; fi; true")


def images_command(images: list[str]) -> str:
    """For each image: on the host already, or pulled now; on the first that cannot be had, prints
    'missing IMAGE' and Docker's message and exits 3. Nothing is stopped or changed."""
    quoted = " ".join(shlex.quote(i) for i in images)
    return (f"for i in {quoted}; do docker image inspect \"$i\" >/dev/null 2>&1 && continue; "
            "out=$(docker pull -q \"$i\" 2>&1) || { echo \"missing $i\"; echo \"$out\" | tail -n 3; exit 3; }; done")
