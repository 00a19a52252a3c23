"""A non-editable install (a wheel in a fresh venv) ships its templates, snapshots and example stacks, and runs
init, validate, plan and render from a folder outside any project."""
from __future__ import annotations

import json
import os
import zipfile

import pytest

from infra.gateway.build import SOURCES
from tests.conftest import BUNDLED, ROOT
from tests.support.wheel import run

pytestmark = pytest.mark.slow  # builds a wheel and a venv: about half a minute on 2 cores


_run = run


def test_the_wheel_holds_every_module_and_data_file_and_no_user_stack(installed):
    wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = [p for top in ("inferry", "infra", "cli") for p in (ROOT / top).rglob("*")
               if p.is_file() and "__pycache__" not in p.parts]
    missing = [str(p.relative_to(ROOT)) for p in tracked if str(p.relative_to(ROOT)) not in names]
    assert not missing, f"left out of the wheel: {missing}"
    for p in (ROOT / "templates").rglob("*"):
        if p.is_file() and "__pycache__" not in p.parts:
            assert f"infra/bundled/templates/{p.relative_to(ROOT / 'templates')}" in names
    assert {f"infra/bundled/stacks/Pulumi.{n}.yaml" for n in BUNDLED} <= names
    assert {f"infra/bundled/caddy/{n}" for n in (*SOURCES, "Dockerfile")} <= names  # `inferry gateway build-caddy`
    assert not [n for n in names if "users-own" in n]


def test_installed_cli_works_from_a_folder_outside_any_project(installed, tmp_path):
    _, bin_dir = installed
    work = tmp_path / "elsewhere"
    work.mkdir()
    assert not any((f / "Pulumi.yaml").exists() for f in (work, *work.parents)), "pick a folder outside projects"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["INFERRY_STATE_DIR"] = str(tmp_path / "state")
    where = _run(bin_dir / "python", "-c", "import infra; print(infra.__file__)", cwd=work, env=env)
    assert where.stdout.startswith(str(bin_dir.parent)), where.stdout  # the installed copy, not the checkout

    def inferry(*args):
        r = _run(bin_dir / "inferry", *args, cwd=work, env=env)
        assert "Traceback" not in r.stderr + r.stdout, r.stderr
        return r

    r = inferry("init", "mine")
    assert r.returncode == 0, r.stderr
    assert (work / "stacks" / "Pulumi.mine.yaml").is_file()
    assert f"{work} is now a Pulumi project" in r.stderr  # says which folder became the project
    assert (work / "Pulumi.yaml").is_file() and (work / "__main__.py").is_file()
    r = inferry("validate", "mine")
    assert r.returncode == 0 and r.stdout.startswith("OK"), r.stderr
    assert "snapshot" not in r.stderr  # the engine option snapshots shipped
    r = inferry("plan", "mine", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["fits"] is True
    r = inferry("render", "mine", "--out", "out")
    assert r.returncode == 0, r.stderr
    assert (work / "out" / "compose.yaml").is_file() or (work / "out" / "run-engine.sh").is_file()
    r = inferry("plan", "eu-ssh", "--json")  # a bundled example by name, from anywhere
    assert r.returncode == 0 and "bundled example" in r.stderr, r.stderr
    assert json.loads(r.stdout)["model"]
    assert inferry("init", "k", "--target", "kubernetes").returncode == 0
    r = inferry("render", "k", "--out", "kout")
    assert r.returncode == 0 and any((work / "kout").iterdir()), r.stderr


def test_the_real_engine_tests_run_the_wheel_in_a_folder_init_made(installed, tmp_path):
    """tests/support/realengine.Project as the real-engine tests use it: `inferry`, `python` (the language host's,
    from PATH) and the program's imports all resolve to the installed wheel, never to this checkout."""
    from tests.support.realengine import Project

    _, bin_dir = installed
    project = Project(tmp_path / "mine", bin_dir)
    project.write_stack("s", {"target": {"kind": "kubernetes"}, "engine": {"kind": "vllm"}}, {})
    assert (project.folder / "__main__.py").read_text().startswith('"""The Pulumi program of this project')
    assert not (project.folder / "infra").exists() and "PYTHONPATH" not in project.env
    found = project.run(["sh", "-c", "command -v inferry; command -v python"]).stdout.split()
    assert found == [str(bin_dir / "inferry"), str(bin_dir / "python")], found
    where = project.run(["python", "-c", "import cli, infra; print(cli.__file__); print(infra.__file__)"]).stdout
    assert all(p.startswith(str(bin_dir.parent)) for p in where.split()), where
