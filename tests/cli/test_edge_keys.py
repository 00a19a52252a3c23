"""A key a gateway will accept is checked for the edge (at least 128 bits of randomness) on both targets, before
anything is created: `inferry up` and `migrate` say so naming the field (never the value), and the printed fix,
run as printed, gives a key that passes; a typed `pulumi up` of a Kubernetes stack stops in the program."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

WEAK = "sk-weak-" + "7" * 24


def _stack(tmp_path: Path, name: str, previous: bool = False) -> Path:
    """A bundled stack behind its gateway, its keys read from the environment."""
    doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{name}.yaml").read_text())
    d = doc["config"]["inferry:deployment"]
    d["target"].setdefault("gateway", {})
    d["serving"]["api_key"] = {"env": "TEST_EDGE_KEY"}
    if previous:
        d["serving"]["previous_api_key"] = {"env": "TEST_EDGE_PREVIOUS"}
    path = tmp_path / f"Pulumi.{name}-edge.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


class _Deployer:
    """The Pulumi side, reached only past the key check: says so instead of deploying."""

    def check(self, stack):
        """Runnable."""

    def up(self, stack, say):
        from infra.errors import InferryError

        raise InferryError("reached the deployment", "nothing: the test's stand-in for Pulumi")


@pytest.fixture
def deployer(monkeypatch):
    monkeypatch.setattr("cli.lifecycle.make_deployer", lambda: _Deployer())


@pytest.mark.parametrize("name", ["aws-k8s", "eu-ssh"])
def test_up_refuses_a_weak_key_naming_the_field_and_the_printed_fix_works(cli, tmp_path, monkeypatch, deployer,
                                                                          name):
    path = _stack(tmp_path, name)
    monkeypatch.setenv("TEST_EDGE_KEY", WEAK)
    r = cli("up", str(path))
    assert r.exit_code == 1 and "serving.api_key" in r.stderr and "128" in r.stderr, r.output
    assert WEAK not in r.output and "Traceback" not in r.output and "reached the deployment" not in r.output
    fix = next(part for part in r.stderr.split("`") if part.startswith("openssl rand"))
    monkeypatch.setenv("TEST_EDGE_KEY", subprocess.run(fix.split(), capture_output=True, text=True,
                                                       check=True).stdout.strip())
    r = cli("up", str(path))
    assert r.exit_code == 1 and "serving.api_key" not in r.stderr and "reached the deployment" in r.stderr, r.output


def test_a_weak_previous_key_is_named_too(cli, tmp_path, monkeypatch, deployer):
    path = _stack(tmp_path, "aws-k8s", previous=True)
    monkeypatch.setenv("TEST_EDGE_KEY", "sk-edge-5e1c9a7f3b2d4c6e8a0f1b3d5c7e9a2b")
    monkeypatch.setenv("TEST_EDGE_PREVIOUS", WEAK)
    r = cli("up", str(path))
    assert r.exit_code == 1 and "serving.previous_api_key" in r.stderr and WEAK not in r.output, r.output


def test_a_typed_pulumi_up_of_a_kubernetes_gateway_stops_where_the_program_reads_the_key():
    """The program checks each key the gateway's config is computed from (its Secret depends on it); offline
    render passes its placeholder text through."""
    import pulumi

    from infra.targets.kubernetes.component import _edge_key
    from tests.support.harness import resolve

    from pulumi.runtime.settings import SETTINGS

    assert _edge_key("<redacted: secret config inferry:apiKey>", "serving.api_key").startswith("<redacted")
    try:
        with pytest.raises(pulumi.RunError, match="serving.previous_api_key") as e:
            resolve(_edge_key(pulumi.Output.from_input(WEAK), "serving.previous_api_key"))
    finally:
        SETTINGS.outputs.clear()  # the SDK keeps the failed Output: the next program run here would raise it again
    assert WEAK not in str(e.value)
    strong = "sk-edge-5e1c9a7f3b2d4c6e8a0f1b3d5c7e9a2b"
    assert resolve(_edge_key(pulumi.Output.from_input(strong), "serving.api_key")) == strong
