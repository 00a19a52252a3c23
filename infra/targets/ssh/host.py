"""Step 1 on each host: read facts, preflight the GPUs and driver, install Docker + NVIDIA toolkit if allowed."""
from __future__ import annotations

from dataclasses import dataclass

from infra.errors import RemoteError
from infra.targets.ssh import preflight
from infra.targets.ssh.facts import HostFacts, parse_facts, probe_command
from infra.targets.ssh.oplog import Ops
from infra.targets.ssh.pool import Conn, session
from infra.targets.ssh.session import Session

# Docker's convenience script (docs.docker.com/engine/install/ubuntu/#install-using-the-convenience-script) and
# NVIDIA's apt repository + `nvidia-ctk runtime configure` (NVIDIA Container Toolkit install guide).
INSTALL_DOCKER = "command -v docker >/dev/null || { curl -fsSL https://get.docker.com | sh; }"
INSTALL_TOOLKIT = (
    "export DEBIAN_FRONTEND=noninteractive; "
    "if ! command -v nvidia-ctk >/dev/null; then "
    "curl -fsSL https://nvidia.github.io/libnvidia-container/gpgkey "
    "| gpg --batch --yes --dearmor -o /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg && "
    "curl -fsSL https://nvidia.github.io/libnvidia-container/stable/deb/nvidia-container-toolkit.list "
    "| sed 's#deb https://#deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] https://#g' "
    "> /etc/apt/sources.list.d/nvidia-container-toolkit.list && apt-get update -qq && "
    "apt-get install -y -qq nvidia-container-toolkit; fi && "
    "nvidia-ctk runtime configure --runtime=docker && systemctl restart docker")


@dataclass(frozen=True)
class HostArgs:
    """Inputs of the host step."""

    conn: Conn
    gpu: str
    gpu_count: int
    engine: str
    runtime: str
    install_docker: bool
    weights_cache: str
    # A GPU the stack declares: its nvidia-smi names (empty for a catalog GPU, whose names the catalog has).
    gpu_names: tuple[str, ...] = ()
    cuda: str = ""  # the CUDA release the engine image needs (ServiceSpec.cuda_requirement)
    gateway_limits: bool = False  # the gateway runs here with limits: its Caddy must be inferry's build


@dataclass(frozen=True)
class HostReport:
    """What the host step found and did."""

    os: str
    gpus: list[str]
    driver: str | None
    cuda: str | None
    docker: str | None
    writes: int
    restarts: int = 0


def read_facts(s: Session, cache_dir: str, runtime: str, step: str = "read facts") -> HostFacts:
    """The host's facts (one command); Docker's only for the docker runtime."""
    return parse_facts(s.run(probe_command(cache_dir, docker=runtime == "docker"), step).out)


def ensure_host(a: HostArgs, private_key: str) -> HostReport:
    """Preflight, then install what the runtime needs when the stack allows it."""
    s = session(a.conn, private_key)
    f = read_facts(s, a.weights_cache, a.runtime)
    req = preflight.Requirements(gpu=a.gpu, gpu_count=a.gpu_count, engine=a.engine, weights_bytes=0,
                                 runtime=a.runtime, install_docker=a.install_docker, gpu_names=a.gpu_names,
                                 cuda=a.cuda, gateway_limits=a.gateway_limits)
    preflight.check(a.conn.label, f, req)
    ops = Ops()
    if a.runtime == "docker" and (not f.docker_client or not f.docker_gpus):
        for name, cmd in (("install Docker", INSTALL_DOCKER), ("install the NVIDIA container toolkit", INSTALL_TOOLKIT)):
            try:
                s.run(cmd, name, timeout=1800)
            except RemoteError as e:
                raise RemoteError(e.message, "install Docker and nvidia-container-toolkit by hand, "
                                  "or check that the host reaches download.docker.com and nvidia.github.io",
                                  where=e.where) from None
            ops.writes.append(name)
        f = read_facts(s, a.weights_cache, a.runtime)
    return HostReport(f.os.pretty, [g.name for g in f.gpus], f.driver, f.cuda, f.docker, len(ops.writes))

