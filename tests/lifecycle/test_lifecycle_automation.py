"""The Automation API deployer: missing CLI, backend and passphrase choice, progress lines."""
from __future__ import annotations

import json
import os

import pytest
from pulumi.automation import EngineEvent

from infra.errors import InferryError, PulumiMissingError
from infra.lifecycle.automation import AutomationDeployer, passphrase_env
from infra.lifecycle.pulumicli import backend_env
from infra.lifecycle.progress import describe
from infra.program import main
from infra.stack.stackfile import load_stack
from tests.conftest import ROOT


def test_missing_pulumi_cli_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # the real environment: no pulumi anywhere on it
    d = AutomationDeployer(main, root=tmp_path, environ={"PULUMI_CONFIG_PASSPHRASE": "x", "HOME": str(tmp_path)})
    with pytest.raises(PulumiMissingError) as e:
        d.up(load_stack("eu-ssh"), print)
    assert "get.pulumi.com" in e.value.render() and "not installed" in e.value.message


def test_cli_up_without_pulumi_exits_1_with_install_hint(cli, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "x")
    for command in ("up", "preview", "outputs"):
        r = cli(command, "eu-ssh")
        assert r.exit_code == 1, r.output
        assert "Traceback" not in r.output and "https://www.pulumi.com/docs/install/" in r.output


def test_state_goes_to_a_local_file_backend_by_default(tmp_path):
    env = backend_env(tmp_path, {"HOME": str(tmp_path)})
    assert env == {"PULUMI_BACKEND_URL": f"file://{tmp_path}/.inferry/state"}
    assert (tmp_path / ".inferry" / "state").is_dir()
    assert (ROOT / ".gitignore").read_text().count(".inferry/") == 1


def test_backend_url_or_login_elsewhere_wins(tmp_path):
    assert backend_env(tmp_path, {"PULUMI_BACKEND_URL": "s3://bucket", "HOME": str(tmp_path)}) == {}
    (tmp_path / ".pulumi").mkdir()
    (tmp_path / ".pulumi" / "credentials.json").write_text(json.dumps({"current": "https://api.pulumi.com"}))
    assert backend_env(tmp_path / "p", {"HOME": str(tmp_path)}) == {}


def test_passphrase_from_env_else_asked_and_never_written(tmp_path):
    stack = load_stack("eu-ssh")
    asked = []
    assert passphrase_env(stack, {"PULUMI_CONFIG_PASSPHRASE": "p"}, asked.append) == {}
    assert asked == []
    env = passphrase_env(stack, {}, lambda prompt: asked.append(prompt) or "typed-secret")
    assert env == {"PULUMI_CONFIG_PASSPHRASE": "typed-secret"} and "eu-ssh" in asked[0]
    with pytest.raises(InferryError, match="no passphrase"):
        passphrase_env(stack, {}, lambda prompt: "")
    written = [p for p in ROOT.rglob("*") if p.is_file() and ".git" not in p.parts and ".venv" not in p.parts
               and p.stat().st_size < 1 << 20 and b"typed-secret" in p.read_bytes() and "tests" not in p.parts]
    assert written == []


def test_other_secrets_provider_needs_no_passphrase(tmp_path):
    text = (ROOT / "stacks" / "Pulumi.eu-ssh.yaml").read_text()
    path = tmp_path / "Pulumi.kms.yaml"
    path.write_text("secretsprovider: awskms://alias/inferry\n" + text)
    assert passphrase_env(load_stack(str(path)), {}, lambda p: pytest.fail("asked")) == {}


def event(**body) -> EngineEvent:
    return EngineEvent.from_json({"sequence": 1, "timestamp": 0, **body})


def meta(op: str, name: str, typ: str = "inferry:ssh:Engine") -> dict:
    return {"op": op, "urn": f"urn:pulumi:eu-ssh::inferry::{typ}::{name}", "type": typ, "provider": "",
            "diffs": ["args"] if op == "update" else []}


def test_engine_events_become_readable_lines():
    assert describe(event(resourcePreEvent={"metadata": meta("create", "gpu-mad-1")})) == \
        "  creating inferry:ssh:Engine gpu-mad-1"
    assert describe(event(resourcePreEvent={"metadata": meta("update", "gpu-mad-1")})) == \
        "  updating inferry:ssh:Engine gpu-mad-1 (args)"
    assert describe(event(resOutputsEvent={"metadata": meta("create", "w", "pulumi-python:dynamic:Resource")})) == \
        "  created dynamic w"
    assert describe(event(resourcePreEvent={"metadata": meta("same", "x")})) is None
    assert describe(event(diagnosticEvent={"message": "host unreachable\n", "color": "never", "severity": "error",
                                           "urn": "urn:pulumi:s::inferry::t::gpu-1"})) == "  error: gpu-1: host unreachable"
    assert describe(event(diagnosticEvent={"message": "dbg", "color": "never", "severity": "debug"})) is None
    line = describe(event(summaryEvent={"maybeCorrupt": False, "durationSeconds": 12,
                                        "resourceChanges": {"create": 2, "same": 5}, "PolicyPacks": {}}))
    assert line == "done in 12s: 2 created, 5 unchanged"
    assert os.environ.get("PULUMI_CONFIG_PASSPHRASE") != "typed-secret"


def test_the_cli_gets_parallelism_for_a_fleet_unless_the_user_chose_one(tmp_path):
    """The CLI's own default is 4 per CPU; inferry asks for PARALLEL, and leaves PULUMI_PARALLEL to the CLI."""
    from infra.lifecycle.automation import PARALLEL

    assert AutomationDeployer(print, root=tmp_path, environ={})._parallel() == {"parallel": PARALLEL}
    assert AutomationDeployer(print, root=tmp_path, environ={"PULUMI_PARALLEL": "16"})._parallel() == {}
