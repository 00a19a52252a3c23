"""`inferry init` makes a user's folder a Pulumi project that `inferry up` and a typed `pulumi up` share; no other
command writes into a folder that is not one."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from infra.lifecycle.projectfiles import project_yaml
from infra.lifecycle.pulumicli import backend_env

INFERRY = str(Path(sys.executable).parent / "inferry")


def _inferry(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    from tests.support.realengine import tools_path

    environ = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_")}
    environ.update(HOME=str(folder.parent / "home"), PATH=tools_path(), PULUMI_CONFIG_PASSPHRASE="x", **env)
    return subprocess.run([INFERRY, *args], cwd=folder, env=environ, capture_output=True, text=True, timeout=120)


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def folder(tmp_path) -> Path:
    f = tmp_path / "mine"
    f.mkdir()
    assert not any((p / "Pulumi.yaml").exists() for p in (f, *f.parents))
    return f


def test_init_makes_the_folder_a_project_and_says_so(folder):
    r = _inferry(folder, "init", "prod")
    assert r.returncode == 0, r.stderr
    doc = yaml.safe_load((folder / "Pulumi.yaml").read_text())
    assert doc["stackConfigDir"] == "stacks" and doc["runtime"]["name"] == "python"
    assert doc["backend"] == {"url": "file://.inferry/state"} and (folder / ".inferry" / "state").is_dir()
    assert "from infra.program import main" in (folder / "__main__.py").read_text()
    assert (folder / "stacks" / "Pulumi.prod.yaml").is_file()
    assert "is now a Pulumi project" in r.stderr and "pulumi up --stack prod" in r.stderr
    assert "inferry validate prod" in r.stdout
    assert _inferry(folder, "validate", "prod").returncode == 0


def test_init_keeps_a_stack_file_that_exists_and_never_overwrites(folder):
    stack = folder / "stacks" / "Pulumi.prod.yaml"
    stack.parent.mkdir()
    stack.write_text("config: {}  # the user's own\n")
    r = _inferry(folder, "init", "prod")
    assert r.returncode == 0 and "kept" in r.stdout, r.stdout + r.stderr
    assert stack.read_text() == "config: {}  # the user's own\n" and (folder / "Pulumi.yaml").is_file()
    before = _tree(folder)
    r = _inferry(folder, "init", "prod")
    assert r.returncode == 1 and "already exists" in r.stderr and _tree(folder) == before


def test_a_folder_that_is_no_project_is_refused_with_the_fix_and_left_as_it_was(folder):
    (folder / "Pulumi.mine.yaml").write_text((Path(__file__).parents[2] / "stacks" / "Pulumi.eu-ssh.yaml").read_text())
    before = _tree(folder)
    for command in ("preview", "up"):
        r = _inferry(folder, command, "Pulumi.mine.yaml")
        assert r.returncode == 1 and "is not a Pulumi project" in r.stderr, r.stderr
        assert "inferry init mine" in r.stderr and "Traceback" not in r.stderr
        assert _tree(folder) == before and not (folder / ".inferry").exists()


def test_the_project_backend_is_the_one_state_for_both_ways(tmp_path):
    text = project_yaml(tmp_path, {"HOME": str(tmp_path)})
    (tmp_path / "Pulumi.yaml").write_text(text)
    assert backend_env(tmp_path, {"HOME": str(tmp_path)}) == {}  # the CLI reads it from Pulumi.yaml, typed or not
    assert (tmp_path / ".inferry" / "state").is_dir()
    # someone already chose a backend: the project file does not pin another
    assert "backend" not in yaml.safe_load(project_yaml(tmp_path, {"PULUMI_BACKEND_URL": "s3://b"}))


def test_a_virtualenv_inside_the_folder_is_named_for_the_language_host(tmp_path):
    venv = tmp_path / ".venv"
    doc = yaml.safe_load(project_yaml(tmp_path, {"HOME": str(tmp_path)}, python=str(venv)))
    assert doc["runtime"]["options"]["virtualenv"] == ".venv"
    doc = yaml.safe_load(project_yaml(tmp_path / "sub", {"HOME": str(tmp_path)}, python=str(venv)))
    assert "options" not in doc["runtime"]
