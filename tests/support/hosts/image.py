"""The stand-in engine image, made offline: Debian's minbase with python3, PyYAML and nginx (debootstrap from
Debian's packages) plus the stand-ins, one root filesystem tarball that each test host's Docker imports under
every image name the stacks render (tests/support/hosts/docker.py), so the rendered compose file runs unchanged.

Cached under $INFERRY_TOOLS/images (default ~/.cache/inferry/tools/images): the Debian part by its package
list (about 2 minutes cold), the stand-in layer by the content of the stand-ins (a second).
"""
from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from tests.support.hosts.files import copy_tools

SUITE, MIRROR = "bookworm", "http://deb.debian.org/debian"
PACKAGES = ("python3", "python3-yaml", "nginx-light")
CACHE = Path(os.environ.get("INFERRY_TOOLS") or Path.home() / ".cache" / "inferry" / "tools") / "images"
TRIM = ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/locale",
        "etc/nginx/sites-enabled/default")
# The folder the GPU hook stand-in hands into every GPU container, as the real hook hands in the driver's files
# (tests/support/hosts/docker.py): the host's knobs in, the engines' starts out.
HANDED = "/run/inferry-gpu"
KNOBS = f"{HANDED}/standin.env"
STARTS = f"{HANDED}/starts.jsonl"
# Inside the image, each stand-in command reads the host's knobs, then runs the stand-in.
WRAPPER = ("#!/bin/sh\nset -a; [ -f {knobs} ] && . {knobs}; set +a\n"
           "export INFERRY_STANDIN_STARTS={starts}\nexec python3 -I /opt/inferry/tests/support/standin/{script} {args}\"$@\"\n")
# `python3 -m sglang.launch_server` (SGLang's command) runs the stand-in; any other python3 call the real one.
PYTHON3 = '#!/bin/sh\nif [ "$1 $2" = "-m sglang.launch_server" ]; then shift 2\n{standin}fi\nexec /usr/bin/python3 "$@"\n'
COMMANDS = {"vllm": ("engine.py", "vllm "), "trtllm-serve": ("engine.py", "trtllm-serve "),
            "nvidia-smi": ("nvidia_smi.py", "")}


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed ({' '.join(cmd[:3])}...):\n{(proc.stdout + proc.stderr)[-3000:]}")


def base_rootfs() -> Path:
    """Debian minbase with PACKAGES, trimmed, as a tarball (built once per package list)."""
    key = hashlib.sha256(f"{SUITE} {MIRROR} {' '.join(PACKAGES)}".encode()).hexdigest()[:12]
    out = CACHE / f"debian-{SUITE}-{key}.tar"
    if out.exists():
        return out
    if shutil.which("debootstrap") is None:
        raise RuntimeError("building the stand-in engine image needs debootstrap: run `scripts/setup.sh --test`")
    CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="rootfs-", dir=CACHE))
    try:
        _run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(work), MIRROR],
             "debootstrap")
        for rel in TRIM:
            target = work / rel
            shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)
        _run(["tar", "--numeric-owner", "-C", str(work), "-cf", f"{out}.tmp", "."], "tar the root filesystem")
        os.replace(f"{out}.tmp", out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    tar.addfile(info, io.BytesIO(data))


def standin_image() -> Path:
    """base_rootfs plus the stand-ins under /opt/inferry and `vllm`, `trtllm-serve`, `nvidia-smi` on PATH."""
    base = base_rootfs()
    with tempfile.TemporaryDirectory() as tmp:
        tools = copy_tools(Path(tmp) / "opt")
        files = sorted(p for p in (Path(tmp) / "opt").rglob("*") if p.is_file())
        digest = hashlib.sha256(base.name.encode() + "".join((WRAPPER, PYTHON3, KNOBS, STARTS)).encode())
        for p in files:
            digest.update(str(p.relative_to(tmp)).encode() + p.read_bytes())
        out = CACHE / f"standin-{digest.hexdigest()[:12]}.tar"
        if out.exists():
            return out
        shutil.copy(base, f"{out}.tmp")
        with tarfile.open(f"{out}.tmp", "a") as tar:
            for p in files:
                _add(tar, f"./opt/inferry/{p.relative_to(tools.parents[2])}", p.read_bytes(), 0o644)
            for command, (script, args) in COMMANDS.items():
                text = WRAPPER.format(knobs=KNOBS, starts=STARTS, script=script, args=args)
                _add(tar, f"./usr/local/bin/{command}", text.encode(), 0o755)
            _add(tar, "./usr/local/bin/python3", PYTHON3.format(
                standin=WRAPPER.format(knobs=KNOBS, starts=STARTS, script="engine.py", args="sglang.launch_server ")
                .split("\n", 1)[1]).encode(), 0o755)
    os.replace(f"{out}.tmp", out)
    return out
