"""One gate: render, plan, preview and up refuse exactly what `inferry validate` refuses, with the same bullets,
before anything is written, planned or deployed (and before the Pulumi CLI is looked for). The program's own
refusal runs under Pulumi's mocks: the point is that nothing reaches an engine."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT


def _bad_stack(tmp_path: Path, **engine) -> str:
    """The eu-ssh example with engine fields changed: schema-valid, refused by the engine's own checks."""
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.eu-ssh.yaml").read_text())
    doc["config"]["inferry:deployment"]["engine"].update(engine)
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _bullets(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.lstrip().startswith("•")]


@pytest.fixture
def refused(cli, tmp_path) -> tuple[str, list[str]]:
    """A stack validate refuses (an engine flag vLLM's parser rejects), and validate's bullets for it."""
    path = _bad_stack(tmp_path, extra_args=["--swap-space=abc"])
    r = cli("validate", path)
    assert r.exit_code == 1 and "OK" not in r.stdout
    bullets = _bullets(r.stderr)
    assert bullets and any("--swap-space" in b for b in bullets)
    return path, bullets


@pytest.mark.parametrize("args", [["render", "{p}", "--out", "{out}"], ["render", "{p}", "--json"],
                                  ["plan", "{p}"], ["plan", "{p}", "--json"], ["preview", "{p}"], ["up", "{p}"]])
def test_every_command_refuses_what_validate_refuses(cli, tmp_path, refused, monkeypatch, args):
    path, bullets = refused
    out = tmp_path / "rendered"
    monkeypatch.setenv("PATH", "")  # no Pulumi CLI: the gate must speak before anything looks for one
    r = cli(*[a.format(p=path, out=out) for a in args])
    assert r.exit_code == 1
    assert _bullets(r.stderr) == bullets, r.stderr
    assert r.stdout == "" and not out.exists()
    assert "Traceback" not in r.output


def test_warnings_do_not_stop_the_gate(cli, tmp_path):
    """A warning (vLLM's weight-only FP8 on an A100) is printed by every command and stops none."""
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.eu-ssh.yaml").read_text())
    doc["config"]["inferry:deployment"]["provider"]["gpu"] = "A100-80GB"
    path = tmp_path / "Pulumi.a100.yaml"
    path.write_text(yaml.safe_dump(doc))
    for args in (["validate", str(path)], ["render", str(path), "--json"], ["plan", str(path), "--json"]):
        r = cli(*args)
        assert r.exit_code == 0, r.output
        assert "warning" in r.stderr and "Marlin" in r.stderr


def test_the_program_refuses_it_too(tmp_path):
    """Typed `pulumi preview|up` run the program: it raises validate's bullets before any resource."""
    import pulumi

    from infra.program import main
    from tests.support.harness import run, stack_config

    config, secret = stack_config(Path(_bad_stack(tmp_path, extra_args=["--swap-space=abc"])))
    with pytest.raises(pulumi.RunError, match="--swap-space"):
        mocks, _ = run(main, config, secret)
