"""Host-fact parsers and preflight on real captures of an H200 host (tests/fixtures/gpu-host/h200)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from infra.errors import RemoteError
from infra.targets.ssh import facts, preflight
from infra.targets.ssh.facts import MARK

H200 = Path(__file__).parents[2] / "fixtures" / "gpu-host" / "h200"
GIB = 1024 ** 3


def capture(name: str) -> str:
    """A capture without its '$ command' first line (the '[exit N]' line stays: nvidia-smi's exit matters)."""
    return "\n".join((H200 / name).read_text().splitlines()[1:])


DOCKER_DOWN = "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"


def probe_output(smi: str | None = None, df_free_kb: int = 500 * 1024 * 1024, docker: dict | None = None) -> str:
    """What probe_command prints on the H200 host (from its captures), with optional overrides; docker:
    {'dockercli', 'docker', 'compose', 'gpuhook'} sections (default: no Docker at all)."""
    d = {"dockercli": "", "docker": "", "compose": "", "gpuhook": "", **(docker or {})}
    return "\n".join([
        f"{MARK}os", capture("os.txt").rsplit("\n", 1)[0],
        f"{MARK}smi", smi if smi is not None else capture("smi_query_nounits.txt"),
        f"{MARK}smiver", capture("smi_version.txt"),
        *[line for key, value in d.items() for line in (f"{MARK}{key}", value)],
        f"{MARK}df", "/var/lib", "Filesystem 1024-blocks Used Available Capacity Mounted on",
        f"/dev/vda1 1000000000 1000 {df_free_kb} 1% /",
        f"{MARK}mem", "MemTotal:       2113412000 kB", "MemAvailable:   2013412000 kB",
        f"{MARK}systemd", "yes", f"{MARK}arch", "x86_64",
    ])


def test_gpus_from_both_csv_forms():
    nounits, _ = facts.parse_gpus(capture("smi_query_nounits.txt"))
    with_units, err = facts.parse_gpus(capture("smi_query.txt"))
    assert err is None
    assert nounits == (facts.Gpu(0, "NVIDIA H200", 143771, "580.159.04", "9.0"),)
    assert with_units[0].memory_mib == 143771 and with_units[0].name == "NVIDIA H200"


def test_driver_and_cuda_from_version_and_banner():
    assert facts.parse_driver_version(capture("smi_version.txt")) == "580.159.04"
    assert facts.parse_cuda_version(capture("smi_version.txt")) == "13.0"
    assert facts.parse_driver_version(capture("smi_plain.txt")) == "580.159.04"
    assert facts.parse_cuda_version(capture("smi_plain.txt")) == "13.0"


def test_os_release():
    o = facts.parse_os_release(capture("os.txt"))
    assert (o.id, o.version_id, o.pretty, o.debian_family) == ("ubuntu", "24.04", "Ubuntu 24.04.3 LTS", True)


def test_whole_probe():
    f = facts.parse_facts(probe_output())
    assert f.gpus[0].name == "NVIDIA H200" and f.driver == "580.159.04" and f.cuda == "13.0"
    assert f.disk_path == "/var/lib" and f.disk_free_bytes == 500 * GIB
    assert f.mem_total_bytes == 2113412000 * 1024 and f.systemd and f.arch == "x86_64" and f.docker is None


def test_nvidia_smi_failure_is_reported_not_parsed():
    gpus, err = facts.parse_gpus("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n[exit 9]")
    assert gpus == () and "couldn't communicate" in err


def req(**kw) -> preflight.Requirements:
    base = dict(gpu="H200", gpu_count=1, engine="vllm", weights_bytes=16 * GIB, runtime="process")
    return preflight.Requirements(**{**base, **kw})


def test_matching_host_passes():
    assert preflight.gaps(facts.parse_facts(probe_output()), req()) == []


@pytest.mark.parametrize("change, expect", [
    (dict(gpu="H100-80GB"), "GPU type: the stack wants H100-80GB (provider.gpu) but the host has NVIDIA H200"),
    (dict(gpu_count=4), "GPU count: the stack wants 4 x H200"),
    (dict(weights_bytes=600 * GIB), "short by 100.0 GiB"),
    (dict(weights_bytes=200 * GIB, trt_build=True), "TensorRT engine build need 600.0 GiB"),
    (dict(runtime="docker"), "Docker is not installed"),
])
def test_each_gap_is_named(change, expect):
    found = preflight.gaps(facts.parse_facts(probe_output()), req(**change))
    assert len(found) == 1 and expect in found[0], found


DOCKER_OK = {"dockercli": "/usr/bin/docker", "docker": "v=28.5.2", "compose": "2.40.3",
             "gpuhook": "/usr/bin/nvidia-container-runtime-hook"}


@pytest.mark.parametrize("docker, expect", [
    ({}, None),
    ({"docker": f"v=\n{DOCKER_DOWN}"}, f"the Docker daemon does not answer ({DOCKER_DOWN}): start it"),
    ({"compose": ""}, "Docker Compose v2 (`docker compose`) is missing"),
    ({"gpuhook": ""}, "Docker cannot give containers GPUs: the NVIDIA Container Toolkit"),
])
def test_docker_runtime_gaps(docker, expect):
    f = facts.parse_facts(probe_output(docker={**DOCKER_OK, **docker}))
    found = preflight.gaps(f, req(runtime="docker"))
    assert found == ([] if expect is None else [found[0]]) and (expect is None or expect in found[0]), found


def test_docker_version_and_error_from_one_run():
    """`docker version --format 'v={{.Server.Version}}' 2>&1` as the Docker CLI prints it: the daemon's version on
    the v= line, or an empty v= line and the client's reason (either order: two streams merged)."""
    assert facts.parse_docker("v=28.5.2\n") == ("28.5.2", None)
    assert facts.parse_docker(f"v=\n{DOCKER_DOWN}\n") == (None, DOCKER_DOWN)
    assert facts.parse_docker(f"{DOCKER_DOWN}\nv=\n") == (None, DOCKER_DOWN)
    assert facts.parse_docker("") == (None, None)


def test_process_runtime_probe_runs_no_docker():
    assert "docker" not in facts.probe_command("/var/lib/inferry", docker=False)
    assert facts.probe_command("/var/lib/inferry").count("docker version") == 1


def test_install_docker_leaves_the_installing_to_the_host_step():
    none = facts.parse_facts(probe_output())
    assert preflight.gaps(none, req(runtime="docker", install_docker=True)) == []
    no_gpus = facts.parse_facts(probe_output(docker={**DOCKER_OK, "gpuhook": ""}))
    assert preflight.gaps(no_gpus, req(runtime="docker", install_docker=True)) == []


def test_old_driver_names_the_minimum():
    f = dataclasses.replace(facts.parse_facts(probe_output()), cuda="12.4", driver="550.54.14")
    found = preflight.gaps(f, req(engine="tensorrt-llm", cuda="13.0"))
    assert found == ["driver: 550.54.14 supports CUDA 12.4 but the tensorrt-llm image needs CUDA 13.0 "
                     "(driver >= 580.65.06)"]


def test_check_raises_with_host_and_every_gap():
    with pytest.raises(RemoteError) as e:
        preflight.check("gpu-1", facts.parse_facts(probe_output()), req(gpu="A100-80GB", weights_bytes=900 * GIB))
    text = e.value.render()
    assert text.startswith("host gpu-1: preflight failed") and "GPU type" in text and "disk" in text
