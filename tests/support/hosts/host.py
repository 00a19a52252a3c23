"""One test host: a real sshd in its own network, mount, UTS and PID namespaces, with private folders."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.hosts import docker, image, netns
from tests.support.hosts.files import SSHD_CONFIG, host_python, keygen

HOSTINIT = Path(__file__).with_name("hostinit.py")
SSHD = "/usr/sbin/sshd"
DEFAULT_WEIGHTS_PATH = "/var/lib/inferry/weights"
STD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Overlays keep the machine's files readable but make every write private to the host.
OVERLAID = ("/etc", "/var", "/opt", "/srv", "/home", "/usr/local")
# Fresh, empty private folders: their own home (not this machine's slow ~/.bashrc), tools, /tmp.
PRIVATE = {"home": "/root", "bin": "/usr/local/bin", "tmp": "/tmp"}
# One folder every host of a run and this machine read and write: the only shared one, wherever the checkout lives
# (a checkout under /tmp, /root or /home is private to each host).
SHARED = "/srv/inferry-shared"


@dataclass(frozen=True)
class HostOptions:
    """What a test host looks like: its GPUs and its weights cache."""

    gpu: str = "h200"
    gpu_count: int = 1
    weights_cache_size: str | int | None = None
    weights_path: str = DEFAULT_WEIGHTS_PATH
    docker: bool = False  # its own dockerd with the stand-in engine image (tests/support/hosts/docker.py)


def _wait(predicate, what: str, timeout: float = 10.0) -> None:
    """Poll predicate until true; raise naming what was awaited."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.01)


class TestHost:
    """A real OpenSSH host on the test network (tests/support/hosts/README.md); made by HostNetwork.add_host(s)."""

    __test__ = False  # not a pytest test class
    port = 22
    user = "root"

    def __init__(self, slot: netns.Slot, name: str, index: int, client_key: Path, options: HostOptions,
                 standin: Path, image_tar: str | None = None):
        self.name, self.index, self.options, self._standin = name, index, options, standin
        self.address = slot.address(index)
        self.netns = slot.netns(name)
        self.root = slot.dir / name
        self.client_key_path = client_key
        self._veth = slot.veth(index)
        self._proc: subprocess.Popen | None = None
        self.init_pid = 0
        try:
            self._prepare(client_key)
            netns.add_host_net(slot, index, self.netns)
            self._boot()
            if options.docker:
                docker.start(self, image_tar or "", docker.image_names())
                self.set_standin()  # the knobs the containers read, handed in by the GPU hook
        except BaseException:
            self.close()
            raise

    # -- construction -------------------------------------------------------------------------
    def _prepare(self, client_key: Path) -> None:
        """Write the host's folder: keys, sshd config, tools, the init spec."""
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)
        self.host_key_line = keygen(self.root / "ssh_host_ed25519_key")
        shutil.copy(f"{client_key}.pub", self.root / "authorized_keys")
        (self.root / "sshd_config").write_text(SSHD_CONFIG.format(d=self.root))
        for sub in PRIVATE:
            (self.root / sub).mkdir()
        os.chmod(self.root / "tmp", 0o1777)
        os.chmod(self.root / "home", 0o700)
        self._install_standins()
        binds = [[str(self.root / sub), target] for sub, target in PRIVATE.items()]
        self.shared_dir.mkdir(exist_ok=True)
        os.chmod(self.shared_dir, 0o1777)
        binds.append([str(self.shared_dir), SHARED])
        if self.options.docker:  # on this machine's disk, not an overlay: dockerd's overlay2 needs that
            (self.root / "docker").mkdir()
            binds.append([str(self.root / "docker"), docker.DATA_ROOT])
        spec = {
            "overlays": [self._overlay(p) for p in OVERLAID],
            "binds": binds,
            "cgroups": docker.cgroup_mounts() if self.options.docker else [],
            # sshd's files and the stand-ins stay visible under the host's own /run; other hosts' do not.
            "keep_in_run": [str(self.root), str(self._standin.parents[2])],
            "weights_path": self.options.weights_path,
            "weights_size": self.options.weights_cache_size,
            "hostname": self.name,
            "sshd": self._sshd_argv(),
            "ready": str(self.root / "ready"),
        }
        (self.root / "spec.json").write_text(json.dumps(spec, indent=1))
        self._write_etc()
        self.set_standin()

    def _write_etc(self) -> None:
        """Resolve the host's own name locally and fail DNS fast (no DNS here; lookups would hang 10 s)."""
        etc = self.root / "overlay" / "etc" / "upper"
        (etc / "hosts").write_text(f"127.0.0.1\tlocalhost\n127.0.1.1\t{self.name}\n::1\tlocalhost\n")
        (etc / "resolv.conf").write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")

    def _overlay(self, path: str) -> list[str]:
        """Create upper/work folders for an overlay of path; return [path, upper, work]."""
        base = self.root / "overlay" / path.strip("/").replace("/", "-")
        (base / "upper").mkdir(parents=True)
        (base / "work").mkdir()
        return [path, str(base / "upper"), str(base / "work")]

    def _install_standins(self) -> None:
        """Put the stand-in nvidia-smi and engines in the host's private /usr/local/bin."""
        gpu_env = f"INFERRY_STANDIN_GPU={self.options.gpu} INFERRY_STANDIN_GPU_COUNT={self.options.gpu_count}"
        python, standin = host_python(), self._standin
        self.install("nvidia-smi", f'exec env {gpu_env} {python} -I -S {standin}/nvidia_smi.py "$@"')
        for program in ("vllm", "trtllm-serve"):
            self.install(program, f'exec {python} -I {standin}/engine.py {program} "$@"')
        self._install_caddy()
        # SGLang runs as `python3 -m sglang.launch_server`: this python3 hands that to the stand-in.
        self.install("python3", f'[ "$1 $2" = "-m sglang.launch_server" ] && shift 2 && '
                     f'exec {python} -I {standin}/engine.py sglang.launch_server "$@"\nexec {python} "$@"')

    def _install_caddy(self) -> None:
        """The real Caddy (scripts/tools.sh's build) in the host's /usr/local/bin, as a host with it installed has
        it: the gateway's install step finds it there (a GPU VM gets it from Caddy's Debian repository)."""
        from tests.support.realengine import TOOLS_BIN

        built, dest = TOOLS_BIN / "caddy", self.root / "bin" / "caddy"
        if not built.is_file():
            return  # the gateway's install step then fails on the host and says so
        try:
            os.link(built, dest)  # 58 MB: linked, not copied, where the filesystems allow
        except OSError:
            shutil.copy2(built, dest)

    def set_standin(self, never_healthy: bool = False, startup_s: float = 0, crash: str = "",
                    version: str = "", token_s: float = 0) -> None:
        """Fault knobs for the stand-in engines started on this host from now on (see standin/engine.py)."""
        knobs = {"GPU": self.options.gpu, "GPU_COUNT": self.options.gpu_count, "RECORD": "1",
                 "NEVER_HEALTHY": "1" if never_healthy else "", "STARTUP_S": startup_s or "", "CRASH": crash,
                 "VERSION": version, "TOKEN_S": token_s or ""}
        text = "".join(f"INFERRY_STANDIN_{k}={v}\n" for k, v in knobs.items() if v != "")
        # Once booted, write through the host's overlay (writing its upper folder directly is undefined).
        etc = self.path("/etc") if self.init_pid else self.root / "overlay" / "etc" / "upper"
        (etc / "inferry-standin.env").write_text(text)
        if self.init_pid:  # containers read it where the GPU hook hands it in (tests/support/hosts/docker.py)
            handed = self.path(docker.HANDED_FROM)
            handed.mkdir(parents=True, exist_ok=True)
            (handed / Path(image.KNOBS).name).write_text(text)

    def engine_starts(self) -> list[dict]:
        """Every stand-in engine start on this host so far, in a process or a container, in time order:
        {'time', 'pid', 'argv'} (count restarts with it)."""
        logs = [self.path("/var/log/inferry-standin/starts.jsonl"),
                self.path(docker.HANDED_FROM) / Path(image.STARTS).name]
        starts = [json.loads(line) for log in logs if log.exists() for line in log.read_text().splitlines()]
        return sorted(starts, key=lambda s: s["time"])

    def kill_sshd_on(self, program: str) -> None:
        """One-shot fault: the first time PROGRAM (e.g. 'curl') runs on the host, SIGKILL every sshd of the host.

        The connection running it drops mid-command; start_sshd() to recover.
        """
        self.once_on(program, "pkill -KILL -x sshd")

    def drop_connections_on(self, program: str) -> None:
        """One-shot fault: the first time PROGRAM runs on the host, SIGKILL every sshd connection process but the
        listener: the connection running it drops mid-command, and a new connection is accepted."""
        listener = self.root / "sshd.pid"
        self.once_on(program, f'for p in $(pgrep -x sshd); do [ "$p" = "$(cat {listener})" ] || kill -KILL "$p"; done')

    def once_on(self, program: str, action: str) -> None:
        """Wrap the system's PROGRAM: the first run does ACTION (shell), then every run runs PROGRAM.

        The wrapper stays in place and an atomic mkdir picks the one run that acts: a wrapper that removed itself
        failed a command starting it at that moment ('cannot open'), which a concurrent read then took for data.
        """
        real = shutil.which(program, path="/usr/sbin:/usr/bin:/sbin:/bin")
        if real is None:
            raise ValueError(f"{program} is not a system command (stand-ins in /usr/local/bin cannot be wrapped)")
        self.install(program, f'mkdir "$0.fired" 2>/dev/null && {{ {action}; }}; exec {real} "$@"')

    def fired(self, program: str) -> bool:
        """Whether the one-shot fault on PROGRAM has acted."""
        return (self.root / "bin" / f"{program}.fired").is_dir()

    def unwrap(self, program: str) -> None:
        """Take a one-shot fault's wrapper (and its mark) off PROGRAM."""
        (self.root / "bin" / program).unlink(missing_ok=True)
        shutil.rmtree(self.root / "bin" / f"{program}.fired", ignore_errors=True)

    def install(self, name: str, script: str) -> Path:
        """Install an executable shell script as /usr/local/bin/NAME on this host only."""
        path = self.root / "bin" / name
        path.write_text(f"#!/bin/sh\n{script}\n")
        path.chmod(0o755)
        return path

    def _sshd_argv(self) -> list[str]:
        return [SSHD, "-f", str(self.root / "sshd_config"), "-E", str(self.sshd_log)]

    def _boot(self) -> None:
        """Start the host's PID-1 init (mounts, hostname, sshd) inside its network namespace."""
        argv = ["ip", "netns", "exec", self.netns, "unshare", "--uts", "--mount", "--propagation", "private",
                "--pid", "--fork", "--kill-child", "--mount-proc",
                sys.executable, "-I", "-S", str(HOSTINIT), str(self.root / "spec.json")]
        with open(self.root / "init.log", "wb") as log:
            self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                          start_new_session=True)
        ready = self.root / "ready"
        _wait(lambda: ready.exists() or self._proc.poll() is not None, f"host {self.name} to boot")
        if not ready.exists():
            raise RuntimeError(f"host {self.name} failed to boot: {(self.root / 'init.log').read_text()}")
        children = Path(f"/proc/{self._proc.pid}/task/{self._proc.pid}/children").read_text().split()
        self.init_pid = int(children[0])
        _wait(self.sshd_listening, f"sshd on {self.name}")

    # -- facts ---------------------------------------------------------------------------------
    @property
    def sshd_log(self) -> Path:
        """sshd's log file (on this machine)."""
        return self.root / "sshd.log"

    @property
    def client_key_text(self) -> str:
        """The test client's private key (OpenSSH PEM text), authorised on every host."""
        return self.client_key_path.read_text()

    @property
    def known_hosts_line(self) -> str:
        """'ADDRESS ssh-ed25519 AAAA...' for a known_hosts file."""
        return f"{self.address} {self.host_key_line}"

    @property
    def shared_dir(self) -> Path:
        """This machine's side of SHARED: the run's one folder every host sees, read-write."""
        return self.root.parent / "shared"

    def path(self, host_path: str) -> Path:
        """Where a path as the host sees it can be read/written from this machine (via /proc/PID/root).

        Absolute symlinks inside the host (e.g. /var/run -> /run) resolve against this machine: use
        the target path, or exec().
        """
        return Path(f"/proc/{self.init_pid}/root") / host_path.lstrip("/")

    def sshd_listening(self) -> bool:
        """True when something listens on TCP port 22 in the host's network namespace."""
        try:
            lines = Path(f"/proc/{self.init_pid or self._proc.pid}/net/tcp").read_text().splitlines()[1:]
        except OSError:
            return False
        return any(f[1].endswith(":0016") and f[3] == "0A" for f in (line.split() for line in lines))

    def _sshd_pids(self) -> list[tuple[int, int]]:
        """(pid, ppid) of every sshd process of this host (listener and per-connection children)."""
        found = []
        for pid in netns.ip("netns", "pids", self.netns, check=False).stdout.split():
            try:
                if os.readlink(f"/proc/{pid}/exe") == SSHD:
                    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    found.append((int(pid), int(stat[1])))
            except OSError:
                continue
        return found

    # -- actions -------------------------------------------------------------------------------
    def exec(self, cmd: str, check: bool = False, timeout: float = 60,
             input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run a shell command as root inside the host (its mounts, network, PIDs), for assertions."""
        argv = ["nsenter", "-t", str(self.init_pid), "-m", "-u", "-n", "-p", "--",
                "/bin/bash", "-c", f"cd /root\n{cmd}"]
        env = {"HOME": "/root", "PATH": STD_PATH, "USER": "root", "LOGNAME": "root", "LANG": "C.UTF-8"}
        return subprocess.run(argv, capture_output=True, text=True, env=env, check=check,
                              timeout=timeout, input=input)

    def start_sshd(self) -> None:
        """Start sshd (daemonised inside the host) and wait until it listens."""
        self.exec(" ".join(self._sshd_argv()), check=True)
        _wait(self.sshd_listening, f"sshd on {self.name}")

    def stop_sshd(self) -> None:
        """Stop the sshd listener gracefully (SIGTERM); open sessions live on, as on a real host."""
        for pid, ppid in self._sshd_pids():
            if ppid == self.init_pid:
                os.kill(pid, signal.SIGTERM)
        _wait(lambda: not self.sshd_listening(), f"sshd on {self.name} to stop")

    def kill_sshd(self) -> None:
        """SIGKILL the listener and every SSH session of the host: connections drop mid-command."""
        for pid, _ in self._sshd_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _wait(lambda: not self._sshd_pids() and not self.sshd_listening(), f"sshd on {self.name} to die")

    def regenerate_host_key(self) -> str:
        """Give the host a new host key (restarts sshd); return the new 'ssh-ed25519 AAAA...' line."""
        self.stop_sshd()
        self.host_key_line = keygen(self.root / "ssh_host_ed25519_key")
        self.start_sshd()
        return self.host_key_line

    def close(self) -> None:
        """Kill everything on the host, remove its network namespace, veth and folder."""
        if self.options.docker and self.init_pid and self._proc and self._proc.poll() is None:
            docker.stop(self)
        if self._proc and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        netns.remove_host_net(self.netns, self._veth)
        shutil.rmtree(self.root, ignore_errors=True)

    def __repr__(self) -> str:
        return f"TestHost({self.name!r}, {self.address})"
