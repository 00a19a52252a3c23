"""A Docker engine inside a test host, as on a GPU VM: Debian's dockerd in the host's own namespaces.

Its data root is on this machine's disk (a bind, so overlay2 works), its socket the usual /run/docker.sock,
its containers in the host's network namespace (the default bridge with published ports, or host networking,
land on the host's address). The images are the stand-in image (tests/support/hosts/image.py) under every name the
stacks render. Stand-ins: `nvidia-container-runtime-hook` (dockerd registers its `nvidia` device driver when
the hook is on its PATH; this one makes no GPU visible: where the real one mounts the driver's files into the
container, it mounts the stand-ins' folder, HANDED_FROM, at image.HANDED, so the same compose file starts as on
a GPU host and nothing else is shared with the host) and, inside the image, the engines and nvidia-smi. The
`docker compose` plugin is scripts/tools.sh's.
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

DATA_ROOT = "/var/lib/docker"
HOOK = "nvidia-container-runtime-hook"
HANDED_FROM = "/var/lib/inferry-gpu"  # on the host: the stand-ins' knobs and their record of starts


def hook_script(handed: str) -> str:
    """`nvidia-container-runtime-hook prestart` as runc runs it: the container's OCI state on stdin, before
    pivot_root, so inside the container's mount namespace both the host's tree and the container's root are seen
    (libnvidia-container mounts the driver's files the same way). Mounts HANDED_FROM at HANDED in the container."""
    return f"""state=$(cat)
set -e
eval "$(printf '%s' "$state" | python3 -c '
import json, os, shlex, sys
s = json.load(sys.stdin)
root = json.load(open(os.path.join(s["bundle"], "config.json")))["root"]["path"]
print("pid=%d root=%s" % (s["pid"], shlex.quote(os.path.join(s["bundle"], root))))')"
mkdir -p {HANDED_FROM}
nsenter -t "$pid" -m sh -c "mkdir -p \"$root{handed}\" && mount --bind {HANDED_FROM} \"$root{handed}\""
"""


def cgroup_mounts() -> list[list[str]]:
    """This machine's cgroup hierarchies ([source, path, type, options]): `ip netns exec` gives the hosts a
    fresh /sys without them, and dockerd needs them."""
    mounts = [line.split()[:4] for line in Path("/proc/self/mounts").read_text().splitlines()]
    return [m for m in mounts if m[1] == "/sys/fs/cgroup" or m[1].startswith("/sys/fs/cgroup/")]


def image_names() -> list[str]:
    """Every image a stack renders by default: the engines' pinned images and the auth proxy's."""
    from infra.engines.registry import ENGINES
    from infra.engines.spec import PROXY_IMAGE

    # Each registered engine's pinned image: a new engine's is tagged without a change here.
    return [e.image.format(version=e.config.model_fields["version"].default) for e in ENGINES] + [PROXY_IMAGE]


def compose_plugin() -> Path:
    """The `docker compose` plugin binary: scripts/tools.sh's build, else one the machine has."""
    from tests.support.realengine import TOOLS_BIN

    system = [Path(d) / "docker-compose" for d in ("/usr/libexec/docker/cli-plugins", "/usr/lib/docker/cli-plugins",
                                                   "/usr/local/lib/docker/cli-plugins")]
    for p in (TOOLS_BIN / "docker-compose", *system):
        if p.is_file():
            return p
    raise RuntimeError("the docker-runtime tests need Docker Compose v2: run `bash scripts/tools.sh`")


def start(host, image_tar: str, names: list[str]) -> None:
    """Start the host's dockerd and load the stand-in image under `names` (the host's tools must see image_tar)."""
    from tests.support.hosts.image import HANDED

    host.install(HOOK, hook_script(HANDED))
    plugins = host.path("/usr/local/lib/docker/cli-plugins")
    plugins.mkdir(parents=True, exist_ok=True)
    shutil.copy(compose_plugin(), plugins / "docker-compose")
    start_daemon(host)
    tags = " && ".join(f"docker tag {names[0]} {n}" for n in names[1:])
    host.exec(f"docker import --change 'CMD [\"nginx\", \"-g\", \"daemon off;\"]' {image_tar} {names[0]} >/dev/null"
              + (f" && {tags}" if tags else ""), check=True, timeout=300)


def start_command(host) -> str:
    """Shell that starts the host's dockerd in the background, as its boot (or `systemctl start docker`) does."""
    args = (f"--host unix:///run/docker.sock --pidfile /run/dockerd.pid --exec-root /run/docker "
            f"--data-root {DATA_ROOT} --storage-driver overlay2 --iptables=false --ip6tables=false "
            f"--cgroup-parent /inferry-{host.name}")
    return f"(setsid dockerd {args} </dev/null >>/var/log/dockerd.log 2>&1 &)"


# Shell that stops dockerd as `systemctl stop docker` does (SIGTERM: it stops its containers, then exits).
STOP_COMMAND = ("p=$(cat /run/dockerd.pid 2>/dev/null) && kill -TERM \"$p\" 2>/dev/null; i=0; "
                "while [ -n \"$p\" ] && kill -0 \"$p\" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done")
# Shell that waits (30 s at most) until the daemon answers.
WAIT_COMMAND = "i=0; until docker version >/dev/null 2>&1 || [ $i -ge 300 ]; do sleep 0.1; i=$((i+1)); done"


def start_daemon(host) -> None:
    """Start the host's dockerd and wait until it answers."""
    host.exec(start_command(host), check=True)
    deadline = time.monotonic() + 30
    while host.exec("docker version --format '{{.Server.Version}}'").returncode != 0:
        if time.monotonic() > deadline:
            raise RuntimeError(f"dockerd on {host.name} did not start:\n"
                               f"{host.exec('tail -n 30 /var/log/dockerd.log').stdout}")
        time.sleep(0.1)


def stop(host) -> None:
    """Remove every container, then stop dockerd (its containers' cgroups are this machine's)."""
    host.exec("ids=$(docker ps -aq 2>/dev/null); [ -z \"$ids\" ] || docker rm -f $ids >/dev/null 2>&1; "
              + STOP_COMMAND, timeout=60)
