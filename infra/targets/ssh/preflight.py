"""Preflight before any change: the host's GPUs, driver and disk fit the stack; errors name host and gap."""
from __future__ import annotations

from dataclasses import dataclass

from infra.errors import RemoteError
from infra.gateway.build import GO_ARCH
from infra.targets.ssh.facts import HostFacts

# Minimum Linux x86_64 driver per CUDA release: CUDA Toolkit release notes, table "CUDA Toolkit and
# Corresponding Driver Versions" (docs.nvidia.com/cuda/cuda-toolkit-release-notes).
MIN_DRIVER = {"12.4": "550.54.14", "12.6": "560.28.03", "12.8": "570.26", "12.9": "575.51.03", "13.0": "580.65.06"}
# A TensorRT engine build keeps the checkpoint and the engine next to the weights: about 2x the weights.
TRT_BUILD_FACTOR = 2.0
GIB = 1024 ** 3


@dataclass(frozen=True)
class Requirements:
    """What the stack needs from every host."""

    gpu: str  # catalog key, e.g. H100-80GB
    gpu_count: int
    engine: str  # the engine's kind, for messages
    weights_bytes: int  # what the weights cache must still hold (0 when already cached or streamed)
    trt_build: bool = False
    runtime: str = "docker"
    install_docker: bool = False
    gpu_names: tuple[str, ...] = ()  # a declared GPU's nvidia-smi names; () means the catalog's for `gpu`
    # The CUDA release the engine image is built on (ServiceSpec.cuda_requirement; "" unknown). The NVIDIA
    # container toolkit refuses to start an image whose NVIDIA_REQUIRE_CUDA exceeds what the driver supports
    # (nvidia-container-toolkit, "cuda>=X" requirement check), so the driver's "CUDA Version" must be at least this.
    cuda: str = ""
    gateway_limits: bool = False  # the gateway runs here with target.gateway.limits: it needs inferry's Caddy


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split(".") if p.isdigit())


def product_matches(product_name: str, gpu_key: str, declared: tuple[str, ...] = ()) -> bool:
    """Whether nvidia-smi's product name (e.g. 'NVIDIA H100 80GB HBM3') is the catalog GPU (e.g. 'H100-80GB'),
    or one of a declared GPU's names (compared as the catalog compares them: case and spacing aside)."""
    if declared:
        wanted = " ".join(product_name.split()).lower()
        return any(wanted == " ".join(n.split()).lower() for n in declared)
    from infra.sizing.catalog import gpu_for_product_name

    return gpu_for_product_name(product_name) == gpu_key


def gaps(f: HostFacts, req: Requirements) -> list[str]:
    """Every way the host falls short of the stack, in words."""
    out = []
    if not f.gpus:
        out.append(f"no usable GPU: {f.smi_error or 'nvidia-smi printed nothing'}")
    else:
        names = sorted({g.name for g in f.gpus})
        match = [g for g in f.gpus if product_matches(g.name, req.gpu, req.gpu_names)]
        if not match:
            out.append(f"GPU type: the stack wants {req.gpu} (provider.gpu) but the host has {', '.join(names)}")
        elif len(match) < req.gpu_count:
            out.append(f"GPU count: the stack wants {req.gpu_count} x {req.gpu} (provider.gpu_count) "
                       f"but the host has {len(match)}")
    out += _driver_gaps(f, req)
    need = int(req.weights_bytes * (1 + (TRT_BUILD_FACTOR if req.trt_build else 0)))
    if need > f.disk_free_bytes:
        what = "the weights and a TensorRT engine build" if req.trt_build else "the weights"
        out.append(f"disk: {what} need {need / GIB:.1f} GiB at {f.disk_path} but only "
                   f"{f.disk_free_bytes / GIB:.1f} GiB is free (short by {(need - f.disk_free_bytes) / GIB:.1f} GiB)")
    if req.runtime == "docker":
        out += _docker_gaps(f, req)
    if req.gateway_limits and f.caddy != "inferry":
        has = "Caddy's standard build" if f.caddy else "no Caddy (its apt package is Caddy's standard build)"
        out.append(f"gateway: target.gateway.limits needs inferry's Caddy build (Caddy with the limits module, "
                   f"caddy/ in inferry's source) but the host has {has}: install it as /usr/bin/caddy "
                   f"(`inferry gateway build-caddy --arch {GO_ARCH.get(f.arch, f.arch or 'amd64')}` builds it "
                   "with Go and prints how), "
                   "or set target.gateway.limits.enabled: false to serve without rate and connection limits")
    return out


def _docker_gaps(f: HostFacts, req: Requirements) -> list[str]:
    """What runtime: docker needs: the client, a daemon that answers, Compose v2, the toolkit's GPU hook."""
    if not f.docker_client:
        if not req.install_docker:
            return ["Docker is not installed (runtime: docker) and target.install_docker is false: install Docker "
                    "(docs.docker.com/engine/install) or set target.install_docker: true"]
        if not f.os.debian_family:
            return [f"Docker is missing and inferry installs it only on Ubuntu/Debian, not {f.os.pretty}"]
        return []  # the host step installs Docker and the toolkit
    out = []
    if f.docker is None:
        out.append(f"the Docker daemon does not answer ({f.docker_error or 'docker version failed'}): start it "
                   "with `sudo systemctl enable --now docker`")
    if f.compose is None:
        out.append("Docker Compose v2 (`docker compose`) is missing: install Docker's compose plugin (package "
                   "docker-compose-plugin from Docker's apt repository, or docker-compose-v2 on Ubuntu)")
    if not f.docker_gpus and not req.install_docker:
        out.append("Docker cannot give containers GPUs: the NVIDIA Container Toolkit (nvidia-container-runtime-hook) "
                   "is not installed; set target.install_docker: true, or install it (docs.nvidia.com/datacenter/"
                   "cloud-native/container-toolkit/latest/install-guide.html)")
    return out


def _driver_gaps(f: HostFacts, req: Requirements) -> list[str]:
    need = req.cuda
    if not need or not f.gpus:
        return []
    if f.cuda is None:
        return [f"driver: could not read the driver's CUDA version (nvidia-smi --version); {req.engine} needs CUDA {need}"]
    if _version(f.cuda) < _version(need):
        return [f"driver: {f.driver} supports CUDA {f.cuda} but the {req.engine} image needs CUDA {need} "
                f"(driver >= {MIN_DRIVER.get(need, '?')})"]
    return []


def check(label: str, f: HostFacts, req: Requirements) -> None:
    """Raise one RemoteError listing every gap of this host, or return."""
    found = gaps(f, req)
    if found:
        raise RemoteError("preflight failed:\n    - " + "\n    - ".join(found),
                          "use a host that matches provider.gpu / provider.gpu_count, upgrade the NVIDIA driver, "
                          "or free disk at target.weights_cache; then apply again", where=f"host {label}")
