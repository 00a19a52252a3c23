"""A non-editable install (a wheel in a fresh venv) ships its templates, snapshots and example stacks, and runs
init, validate, plan and render from a folder outside any project."""
from __future__ import annotations

import json
import os
import zipfile

import pytest

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
