"""A key a gateway will accept is checked for the edge (at least 128 bits of randomness) on Kubernetes as on SSH
hosts: the program stops where it reads the key, naming the field (never the value), before the gateway's config
is written. (inferry never decrypts secrets itself: the check runs where Pulumi hands the program its values.)"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

WEAK = "sk-weak-" + "7" * 24


def _stack(tmp_path: Path, previous: bool = False) -> Path:
    """The bundled Kubernetes stack behind its gateway, its keys read from the environment."""
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.aws-k8s.yaml").read_text())
    d = doc["config"]["inferry:deployment"]
    d["target"]["gateway"] = {}
    d["serving"]["api_key"] = {"env": "TEST_EDGE_KEY"}
    if previous:
        d["serving"]["previous_api_key"] = {"env": "TEST_EDGE_PREVIOUS"}
    path = tmp_path / "Pulumi.aws-k8s-edge.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("key,previous,field", [(WEAK, None, "serving.api_key"),
                                                ("sk-edge-5e1c9a7f3b2d4c6e8a0f1b3d5c7e9a2b", WEAK,
                                                 "serving.previous_api_key")])
def test_a_typed_pulumi_up_of_a_kubernetes_gateway_stops_before_its_config_is_written(tmp_path, monkeypatch, key,
                                                                                     previous, field):
    import pulumi

    from infra.program import main
    from tests.support.harness import RecordingMocks, forget_failed_run, run, stack_config

    monkeypatch.setenv("TEST_EDGE_KEY", key)
    if previous:
        monkeypatch.setenv("TEST_EDGE_PREVIOUS", previous)
    config, secret = stack_config(_stack(tmp_path, previous=previous is not None))
    mocks = RecordingMocks()
    try:
        with pytest.raises(pulumi.RunError, match=field) as e:
            run(main, config, secret, mocks=mocks)
    finally:
        forget_failed_run()
    assert WEAK not in str(e.value) and "openssl rand -hex 32" in str(e.value)
    assert not [r for r in mocks.of_type("kubernetes:core/v1:Secret") if "gateway" in r.name]


def test_offline_render_passes_its_placeholder_and_a_strong_key_passes():
    import pulumi

    from infra.targets.kubernetes.component import _edge_key
    from tests.support.harness import resolve

    assert _edge_key("<redacted: secret config inferry:apiKey>", "serving.api_key").startswith("<redacted")
    strong = "sk-edge-5e1c9a7f3b2d4c6e8a0f1b3d5c7e9a2b"
    assert resolve(_edge_key(pulumi.Output.from_input(strong), "serving.api_key")) == strong
