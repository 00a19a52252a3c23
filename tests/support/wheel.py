"""inferry as a pip user has it: a wheel built from a copy of the sources, installed alone into a fresh venv."""
from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import ROOT

SOURCES = ("pyproject.toml", "README.md", "LICENSE", "inferry", "infra", "cli", "templates", "stacks", "caddy")


def run(*cmd, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """A command's result (text), 5 minutes at most."""
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(wheel, venv bin folder): the package built from a copy of the sources and installed, alone, into a new
    venv whose dependencies come from the test venv (a .pth line: no editable finder, no checkout on the path;
    the suite must not download the dependencies on every run)."""
    tmp = tmp_path_factory.mktemp("package")
    src = tmp / "src"
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        elif (ROOT / name).exists():
            src.mkdir(exist_ok=True)
            shutil.copy(ROOT / name, src / name)
    (src / "stacks" / "Pulumi.users-own.yaml").write_text("config: {}\n")  # a user's stack: never shipped
    built = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                tmp / "dist", src, cwd=tmp)
    assert built.returncode == 0, built.stderr
    wheel = next((tmp / "dist").glob("inferry-*.whl"))
    venv = tmp / "venv"
    assert run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp).returncode == 0
    site = Path(run(venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                    cwd=tmp).stdout.strip())
    (site / "test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = run(sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--no-deps", "-q",
               wheel, cwd=tmp)
    assert done.returncode == 0, done.stderr
    return wheel, venv / "bin"
