"""The stand-in nvidia-smi on test hosts prints the real captures byte for byte, and H100 / multi-GPU variants."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.hosts.fixtures import ssh_connect
from tests.support.standin import nvidia_smi

CAPTURES = {  # capture file -> nvidia-smi arguments it was taken with
    "smi_plain.txt": "", "smi_L.txt": "-L", "smi_version.txt": "--version", "smi_q.xml": "-q -x",
    "smi_topo.txt": "topo -m",
    "smi_query.txt": "--query-gpu=index,name,uuid,memory.total,memory.used,memory.free,driver_version,"
                     "compute_cap,pci.bus_id,power.limit,clocks.max.sm --format=csv",
    "smi_query_nounits.txt": "--query-gpu=index,name,memory.total,driver_version,compute_cap "
                             "--format=csv,noheader,nounits",
}


@pytest.fixture(scope="module")
def gpu_host(host_network):
    host = host_network.add_host("gpu1")
    yield host
    host_network.remove_host(host)


def test_captures_command_lines_match_the_table():
    for name, args in CAPTURES.items():
        first = (Path(nvidia_smi.FIXTURES) / name).read_text().splitlines()[0]
        assert first in (f"$ nvidia-smi {args}".rstrip(), "<?xml version=\"1.0\" ?>")


@pytest.mark.parametrize("capture", sorted(CAPTURES))
def test_nvidia_smi_on_a_host_prints_the_capture_byte_for_byte(gpu_host, capture):
    out = subprocess.run(["nsenter", "-t", str(gpu_host.init_pid), "-m", "-u", "-n", "-p", "--",
                          "/usr/local/bin/nvidia-smi", *CAPTURES[capture].split()], capture_output=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == nvidia_smi.capture(capture).encode()


def test_nvidia_smi_over_ssh_uses_the_host_private_tool(gpu_host):
    with ssh_connect(gpu_host) as client:
        _, out, _ = client.exec_command("command -v nvidia-smi; nvidia-smi -L")
        assert out.read().decode() == "/usr/local/bin/nvidia-smi\n" + nvidia_smi.capture("smi_L.txt")


def test_h100_host_with_two_gpus(make_hosts):
    (host,) = make_hosts(1, gpu="h100", gpu_count=2)
    listing = host.exec("nvidia-smi -L").stdout.splitlines()
    assert [line.split(" (UUID")[0] for line in listing] == ["GPU 0: NVIDIA H100 80GB HBM3",
                                                             "GPU 1: NVIDIA H100 80GB HBM3"]
    assert len({line.split("UUID: ")[1] for line in listing}) == 2
    csv = host.exec("nvidia-smi --query-gpu=index,name,memory.total,compute_cap --format=csv").stdout
    assert csv == ("index, name, memory.total [MiB], compute_cap\n0, NVIDIA H100 80GB HBM3, 81559 MiB, 9.0\n"
                   "1, NVIDIA H100 80GB HBM3, 81559 MiB, 9.0\n")
    assert host.exec("nvidia-smi -q -x").stdout.count("<product_name>NVIDIA H100 80GB HBM3<") == 2
    assert host.exec("nvidia-smi").stdout.count("NVIDIA H100 80GB HBM3") == 2


def test_nvidia_smi_refuses_an_unknown_field(gpu_host):
    out = gpu_host.exec("nvidia-smi --query-gpu=name,bogus --format=csv")
    assert out.returncode == 2 and out.stdout.startswith('Field "bogus" is not a valid field to query.')
