"""`inferry init` writes a commented stack file that validates, and never overwrites."""
from __future__ import annotations

import itertools

import pytest

from infra.stack.stackfile import load_stack


@pytest.mark.parametrize("target,engine", list(itertools.product(["ssh", "kubernetes"], ["vllm", "tensorrt-llm", "sglang"])))
def test_init_writes_a_valid_commented_stack(cli, tmp_path, target, engine):
    path = tmp_path / "Pulumi.new.yaml"
    result = cli("init", str(path), "--target", target, "--engine", engine)
    assert result.exit_code == 0, result.output
    assert "#" in path.read_text()
    d = load_stack(str(path)).deployment
    assert (d.target.kind, d.engine.kind) == (target, engine)
    assert cli("validate", str(path)).exit_code == 0


def test_init_refuses_to_overwrite(cli, tmp_path):
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text("keep me")
    result = cli("init", str(path))
    assert result.exit_code == 1 and "already exists" in result.output
    assert path.read_text() == "keep me"


def test_init_rejects_unknown_kind(cli, tmp_path):
    result = cli("init", str(tmp_path / "Pulumi.y.yaml"), "--target", "nomad")
    assert result.exit_code == 1 and "--target" in result.output
    assert not (tmp_path / "Pulumi.y.yaml").exists()


@pytest.mark.parametrize("name", ["_under", ".dot", "a.b_c-1"])
def test_any_name_init_accepts_works_with_every_later_command(cli, tmp_path, monkeypatch, name):
    """One stack-name rule (Pulumi's) for init, validate, plan and the measurements plan reads."""
    monkeypatch.setenv("INFERRY_STATE_DIR", str(tmp_path / "state"))
    path = tmp_path / f"Pulumi.{name}.yaml"
    assert cli("init", str(path)).exit_code == 0
    for command in ("validate", "plan"):
        result = cli(command, str(path))
        assert result.exit_code == 0, (command, result.output)
