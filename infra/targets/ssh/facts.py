"""Host facts, read-only: one probe command and pure parsers of what it prints."""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

MARK = "@@inferry:"
# The one query the parsers read; same columns as tests/fixtures/gpu-host/h200/smi_query_nounits.txt.
COLUMNS = ("index", "name", "memory.total", "driver_version", "compute_cap")
SMI_QUERY = f"nvidia-smi --query-gpu={','.join(COLUMNS)} --format=csv,noheader,nounits"


@dataclass(frozen=True)
class Gpu:
    """One GPU as nvidia-smi reports it."""

    index: int
    name: str
    memory_mib: int
    driver: str
    compute_cap: str


@dataclass(frozen=True)
class OsInfo:
    """/etc/os-release, the fields that matter."""

    id: str
    version_id: str
    pretty: str
    like: tuple[str, ...] = ()

    @property
    def debian_family(self) -> bool:
        """Ubuntu, Debian and their derivatives (where apt installs Docker and the NVIDIA toolkit)."""
        return self.id in ("ubuntu", "debian") or "debian" in self.like or "ubuntu" in self.like


@dataclass(frozen=True)
class HostFacts:
    """Everything preflight and the runtimes need to know about a host."""

    os: OsInfo
    gpus: tuple[Gpu, ...]
    smi_error: str | None
    driver: str | None
    cuda: str | None
    docker: str | None  # the daemon's version, None when it does not answer
    docker_client: bool  # the `docker` command is installed
    docker_error: str | None  # why `docker version` could not reach the daemon
    compose: str | None  # Docker Compose v2 (`docker compose`) version
    docker_gpus: bool  # the NVIDIA Container Toolkit's hook: dockerd's `nvidia` device driver, for GPU containers
    disk_path: str
    disk_free_bytes: int
    mem_total_bytes: int
    mem_available_bytes: int
    systemd: bool
    arch: str
    # The gateway's Caddy: "inferry" (its build, with the limits module), "standard" (Caddy's own build), None.
    caddy: str | None = None


# dockerd registers its `nvidia` device driver (compose's GPU reservations, `--gpus`) only when this
# NVIDIA Container Toolkit program is on its PATH (moby daemon/nvidia_linux.go).
GPU_HOOK = "nvidia-container-runtime-hook"
LIMITS_MODULE = "http.handlers.inferry_limits"  # caddy/limits: in inferry's Caddy build, not in Caddy's own
DOCKER_V = "v="  # marks the daemon's version in `docker version`'s merged output


def probe_command(cache_dir: str, docker: bool = True) -> str:
    """A shell command printing every fact in marked sections (one round trip); Docker's only when asked (the
    process runtime never uses them, and three Docker CLI runs are most of a probe's CPU)."""
    q = shlex.quote(cache_dir)
    # One `docker version` gives both: the daemon's version on the `v=` line (empty when it does not answer), and
    # the client's reason on stderr, merged after it.
    docker_facts = [
        f"echo {MARK}dockercli", "command -v docker",
        f"echo {MARK}docker", f"docker version --format '{DOCKER_V}{{{{.Server.Version}}}}' 2>&1 | tail -n 5",
        f"echo {MARK}compose", "docker compose version --short 2>/dev/null",
        f"echo {MARK}gpuhook", f"command -v {GPU_HOOK}",
    ] if docker else []
    return "; ".join([
        f"echo {MARK}os", "cat /etc/os-release 2>/dev/null",
        f"echo {MARK}smi", f"{SMI_QUERY} 2>&1; echo \"[exit $?]\"",
        f"echo {MARK}smiver", "nvidia-smi --version 2>/dev/null",
        *docker_facts,
        f"echo {MARK}df", f"d={q}; while [ ! -e \"$d\" ]; do d=$(dirname \"$d\"); done; echo \"$d\"; df -Pk \"$d\"",
        f"echo {MARK}mem", "grep -E '^(MemTotal|MemAvailable):' /proc/meminfo",
        f"echo {MARK}systemd", "[ -d /run/systemd/system ] && echo yes",
        f"echo {MARK}arch", "uname -m",
        f"echo {MARK}caddy", f"c=$(command -v caddy || ls /usr/bin/caddy) 2>/dev/null && "
        f"{{ \"$c\" list-modules 2>/dev/null | grep -qx {LIMITS_MODULE} && echo inferry || echo standard; }}",
    ])


def sections(text: str) -> dict[str, str]:
    """Split probe output into its marked sections."""
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith(MARK):
            current = line[len(MARK):].strip()
            out[current] = []
        elif current is not None:
            out[current].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def parse_os_release(text: str) -> OsInfo:
    """/etc/os-release (KEY=value, optionally quoted)."""
    kv = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith("#"):
            k, _, v = line.partition("=")
            kv[k.strip()] = v.strip().strip('"').strip("'")
    return OsInfo(kv.get("ID", "unknown"), kv.get("VERSION_ID", ""), kv.get("PRETTY_NAME", kv.get("ID", "unknown")),
                  tuple(kv.get("ID_LIKE", "").split()))


def parse_gpus(text: str) -> tuple[tuple[Gpu, ...], str | None]:
    """`nvidia-smi --query-gpu=index,name,memory.total,driver_version,compute_cap --format=csv[,noheader][,nounits]`.

    Returns (gpus, error); error holds nvidia-smi's own message when it failed or is missing.
    """
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("$ ")]
    exit_line = next((ln for ln in lines if re.fullmatch(r"\[exit \d+\]", ln.strip())), "[exit 0]")
    lines = [ln for ln in lines if ln is not exit_line and not re.fullmatch(r"\[exit \d+\]", ln.strip())]
    if exit_line.strip() != "[exit 0]":
        return (), (" ".join(lines).strip() or exit_line.strip())[:300]
    cols = list(COLUMNS)
    gpus = []
    for ln in lines:
        cells = [c.strip() for c in ln.split(",")]
        if cells[0] == "index":  # the header of --format=csv names the columns (any order, with units)
            cols = [re.sub(r"\s*\[.*\]$", "", c) for c in cells]
            continue
        row = dict(zip(cols, cells))
        mem = re.match(r"(\d+)", row.get("memory.total", ""))
        if not row.get("index", "").isdigit() or mem is None:
            return (), f"unexpected nvidia-smi line: {ln[:120]}"
        gpus.append(Gpu(int(row["index"]), row.get("name", "?"), int(mem.group(1)), row.get("driver_version", ""),
                        row.get("compute_cap", "")))
    return tuple(gpus), None if gpus else "nvidia-smi listed no GPUs"


def parse_cuda_version(text: str) -> str | None:
    """The CUDA version the driver supports, from `nvidia-smi` or `nvidia-smi --version`."""
    m = re.search(r"CUDA Version\s*:?\s*(\d+\.\d+)", text)
    return m.group(1) if m else None


def parse_driver_version(text: str) -> str | None:
    """The driver version from `nvidia-smi --version` or the `nvidia-smi` banner."""
    m = re.search(r"(?:DRIVER version\s*:|Driver Version:)\s*(\d+(?:\.\d+)+)", text)
    return m.group(1) if m else None


def parse_df(text: str) -> tuple[str, int]:
    """(path, free bytes) from the probe's `echo PATH; df -Pk PATH`."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 3:
        return (lines[0] if lines else "?"), 0
    fields = lines[-1].split()
    return lines[0], int(fields[3]) * 1024


def parse_meminfo(text: str) -> tuple[int, int]:
    """(MemTotal, MemAvailable) in bytes from /proc/meminfo lines."""
    kv = {m.group(1): int(m.group(2)) * 1024 for m in re.finditer(r"^(\w+):\s+(\d+) kB", text, re.M)}
    return kv.get("MemTotal", 0), kv.get("MemAvailable", 0)


def parse_docker(text: str) -> tuple[str | None, str | None]:
    """(the daemon's version, None) or (None, why not) from `docker version --format 'v=...' 2>&1`."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    version = next((ln[len(DOCKER_V):] for ln in lines if ln.startswith(DOCKER_V) and ln[len(DOCKER_V):]), None)
    errors = [ln for ln in lines if not ln.startswith(DOCKER_V)]
    return version, None if version or not errors else errors[-1]


def parse_facts(text: str) -> HostFacts:
    """Every fact from one probe's output."""
    s = sections(text)
    gpus, smi_error = parse_gpus(s.get("smi", ""))
    driver = parse_driver_version(s.get("smiver", "")) or (gpus[0].driver if gpus else None)
    disk_path, free = parse_df(s.get("df", ""))
    total, avail = parse_meminfo(s.get("mem", ""))
    docker, docker_error = parse_docker(s.get("docker", ""))
    return HostFacts(
        os=parse_os_release(s.get("os", "")), gpus=gpus, smi_error=smi_error, driver=driver,
        cuda=parse_cuda_version(s.get("smiver", "")), docker=docker, docker_error=docker_error,
        docker_client=bool(s.get("dockercli", "").strip()),
        compose=s.get("compose", "").strip() or None, docker_gpus=bool(s.get("gpuhook", "").strip()),
        disk_path=disk_path, disk_free_bytes=free,
        mem_total_bytes=total, mem_available_bytes=avail, systemd=s.get("systemd", "").strip() == "yes",
        arch=s.get("arch", "").strip(), caddy=s.get("caddy", "").strip() or None)
