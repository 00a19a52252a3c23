"""Stand-in `nvidia-smi` for test hosts: prints what a real H200 (or H100) host prints, from real captures.

Installed per host as /usr/local/bin/nvidia-smi; the host chooses the GPU with INFERRY_STANDIN_GPU (h200|h100)
and INFERRY_STANDIN_GPU_COUNT. Stdlib only. With one H200 every output is byte-identical to the captures in
fixtures/h200/ (copies of tests/fixtures/gpu-host/h200, driver 580.159.04, CUDA 13.0).
"""
from __future__ import annotations

import os
import sys

# Only the stdlib's cheapest modules at start (hashlib, re, dataclasses and pathlib are imported where used or not
# at all): the fleet bench runs this twice per host, 64 hosts at once on one machine, and a run's import time was
# three quarters of it.
FIXTURES = os.path.join(os.path.dirname(os.path.realpath(__file__)), "fixtures", "h200")
DRIVER = "580.159.04"


class Model:
    """Per-model facts of one GPU kind."""

    def __init__(self, name: str, memory_total: int, memory_reserved: int, compute_cap: str = "9.0",
                 power_limit: str = "700.00 W", clocks_max_sm: str = "1980 MHz", clocks_max_memory: str = "3201 MHz"):
        self.name, self.compute_cap, self.power_limit = name, compute_cap, power_limit
        self.memory_total, self.memory_reserved = memory_total, memory_reserved  # MiB, as nvidia-smi reports them
        self.clocks_max_sm, self.clocks_max_memory = clocks_max_sm, clocks_max_memory


# H200: the capture. H100 80GB HBM3 (SXM): 81559 MiB total as nvidia-smi reports it, 700 W, 1980 MHz, CC 9.0
# (NVIDIA H100 datasheet: 80 GB HBM3, 700 W SXM); memory clock 2619 MHz; reservation in the capture's proportion.
MODELS = {
    "h200": Model("NVIDIA H200", 143771, 616),
    "h100": Model("NVIDIA H100 80GB HBM3", 81559, 349, clocks_max_memory="2619 MHz"),
}
CAPTURED_UUID = "GPU-ca661968-2ffa-b83c-eb5b-8795e8295937"
CAPTURED_BUS = "00000000:00:06.0"


class Gpu:
    """One GPU of the host."""

    def __init__(self, index: int, model: Model, uuid: str, bus_id: str):
        self.index, self.model, self.uuid, self.bus_id = index, model, uuid, bus_id

    @property
    def memory_free(self) -> int:
        """Free MiB when idle (nvidia-smi rounds: total - reserved + 1 in the capture)."""
        return self.model.memory_total - self.model.memory_reserved + 1


def host_gpus() -> list[Gpu]:
    """The GPUs this host has, from its environment."""
    kind = os.environ.get("INFERRY_STANDIN_GPU", "h200").lower()
    count = int(os.environ.get("INFERRY_STANDIN_GPU_COUNT", "1"))
    model = MODELS[kind]
    gpus = []
    for i in range(count):
        if kind == "h200" and i == 0:
            uuid, bus = CAPTURED_UUID, CAPTURED_BUS
        else:
            import hashlib

            h = hashlib.sha256(f"{kind}-{i}".encode()).hexdigest()
            uuid, bus = f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}", f"00000000:00:{6 + i:02X}.0"
        gpus.append(Gpu(i, model, uuid, bus))
    return gpus


def capture(name: str) -> str:
    """A capture's output: without its '$ command' first line and '[exit N]' last line."""
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        text = f.read()
    if not text.startswith("$ "):
        return text
    lines = text.splitlines(keepends=True)
    assert lines[-1].startswith("[exit ")
    return "".join(lines[1:-1])


# field -> (unit in the header or "", value(gpu, gpus))
FIELDS = {
    "index": ("", lambda g, _: str(g.index)),
    "count": ("", lambda _, gs: str(len(gs))),
    "name": ("", lambda g, _: g.model.name),
    "uuid": ("", lambda g, _: g.uuid),
    "serial": ("", lambda g, _: str(1653724062865 + g.index)),
    "memory.total": ("MiB", lambda g, _: f"{g.model.memory_total} MiB"),
    "memory.reserved": ("MiB", lambda g, _: f"{g.model.memory_reserved} MiB"),
    "memory.used": ("MiB", lambda g, _: "0 MiB"),
    "memory.free": ("MiB", lambda g, _: f"{g.memory_free} MiB"),
    "driver_version": ("", lambda g, _: DRIVER),
    "vbios_version": ("", lambda g, _: "96.00.A5.00.1A"),
    "compute_cap": ("", lambda g, _: g.model.compute_cap),
    "pci.bus_id": ("", lambda g, _: g.bus_id),
    "power.limit": ("W", lambda g, _: g.model.power_limit),
    "power.draw": ("W", lambda g, _: "77.32 W"),
    "clocks.max.sm": ("MHz", lambda g, _: g.model.clocks_max_sm),
    "clocks.max.memory": ("MHz", lambda g, _: g.model.clocks_max_memory),
    "temperature.gpu": ("", lambda g, _: "29"),
    "utilization.gpu": ("%", lambda g, _: "0 %"),
    "utilization.memory": ("%", lambda g, _: "0 %"),
    "persistence_mode": ("", lambda g, _: "Enabled"),
    "pstate": ("", lambda g, _: "P0"),
    "mig.mode.current": ("", lambda g, _: "Disabled"),
    "compute_mode": ("", lambda g, _: "Default"),
}
ALIASES = {"gpu_name": "name", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id", "gpu_serial": "serial"}


def query(fields: list[str], fmt: set[str], gpus: list[Gpu]) -> tuple[str, int]:
    """--query-gpu=FIELDS --format=csv[,noheader][,nounits] as nvidia-smi prints it."""
    for field in fields:
        if ALIASES.get(field, field) not in FIELDS:
            return f'Field "{field}" is not a valid field to query.\n\n', 2
    header = ", ".join(f"{f} [{FIELDS[ALIASES.get(f, f)][0]}]" if FIELDS[ALIASES.get(f, f)][0] else f
                       for f in fields)
    rows = [] if "noheader" in fmt else [header]
    for gpu in gpus:
        values = []
        for field in fields:
            unit, value = FIELDS[ALIASES.get(field, field)]
            text = value(gpu, gpus)
            values.append(text[: -len(unit) - 1] if unit and "nounits" in fmt else text)
        rows.append(", ".join(values))
    return "".join(row + "\n" for row in rows), 0


def plain(gpus: list[Gpu]) -> str:
    """The default table: the capture's frame with one block per GPU."""
    import re

    lines = capture("smi_plain.txt").splitlines(keepends=True)
    head, block, sep, tail = lines[:8], lines[8:11], lines[11], lines[12:]
    out = list(head)
    for gpu in gpus:
        b0 = re.sub(r"^\|\s+\d+  .*?On  \|", lambda m: _name_cell(gpu, len(m.group(0))), block[0])
        b0 = b0.replace(CAPTURED_BUS, gpu.bus_id)
        b1 = block[1].replace("       0MiB / 143771MiB", f"{0:>8}MiB / {gpu.model.memory_total:>6}MiB")
        out += [b0, b1, block[2], sep]
    return "".join(out + tail)


def _name_cell(gpu: Gpu, width: int) -> str:
    """'|   0  NAME ... On  |' padded to the capture's width."""
    left = f"|{gpu.index:>4}  {gpu.model.name}"
    return left + " " * (width - len(left) - len("On  |")) + "On  |"


def xml(gpus: list[Gpu]) -> str:
    """-q -x: the capture's XML with one <gpu> element per GPU."""
    text = capture("smi_q.xml")
    start, end = text.index("\t<gpu id="), text.index("\t</gpu>\n") + len("\t</gpu>\n")
    template, blocks = text[start:end], []
    for gpu in gpus:
        m = gpu.model
        block = (template.replace(CAPTURED_BUS, gpu.bus_id).replace(CAPTURED_UUID, gpu.uuid)
                 .replace("<product_name>NVIDIA H200<", f"<product_name>{m.name}<")
                 .replace("<minor_number>0<", f"<minor_number>{gpu.index}<")
                 .replace("<pci_device>06<", f"<pci_device>{6 + gpu.index:02X}<")
                 .replace("<total>143771 MiB<", f"<total>{m.memory_total} MiB<")
                 .replace("<reserved>616 MiB<", f"<reserved>{m.memory_reserved} MiB<")
                 .replace("<free>143156 MiB<", f"<free>{gpu.memory_free} MiB<"))
        blocks.append(block)
    head = text[:start].replace("<attached_gpus>1<", f"<attached_gpus>{len(gpus)}<")
    return head + "".join(blocks) + text[end:]


def run(argv: list[str]) -> tuple[str, int]:
    """Answer one command line: (stdout, exit code)."""
    gpus = host_gpus()
    args = _split_eq(argv)
    if not args:
        return plain(gpus), 0
    if args in (["-L"], ["--list-gpus"]):
        return "".join(f"GPU {g.index}: {g.model.name} (UUID: {g.uuid})\n" for g in gpus), 0
    if args in (["--version"], ["-v"]):
        return capture("smi_version.txt"), 0
    if sorted(args) in (["-q", "-x"], ["--query", "--xml-format"], ["-q", "--xml-format"], ["--query", "-x"]):
        return xml(gpus), 0
    if args == ["topo", "-m"]:
        return capture("smi_topo.txt"), 0
    opts = dict(zip(args[::2], args[1::2])) if len(args) % 2 == 0 else {}
    if "--query-gpu" in opts and set(opts) <= {"--query-gpu", "--format", "-i", "--id"}:
        fmt = opts.get("--format", "").split(",")
        if fmt[0] != "csv":
            return "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n", 2
        wanted = opts.get("-i", opts.get("--id"))
        chosen = [g for g in gpus if wanted is None or str(g.index) in wanted.split(",")]
        return query(opts["--query-gpu"].split(","), set(fmt[1:]), chosen)
    return "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n", 2


def _split_eq(argv: list[str]) -> list[str]:
    """['--format=csv'] -> ['--format', 'csv'] for long options."""
    out = []
    for arg in argv:
        out.extend(arg.split("=", 1) if arg.startswith("--") and "=" in arg else [arg])
    return out


def main() -> None:
    """Print the answer for sys.argv and exit with nvidia-smi's status."""
    text, code = run(sys.argv[1:])
    sys.stdout.write(text)
    sys.exit(code)


if __name__ == "__main__":
    main()
