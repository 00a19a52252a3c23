"""`inferry validate` rejects bad Kubernetes names, labels and quantities, and names a fetch image that cannot
address the store, with printed fixes that validate."""
from __future__ import annotations

import re

import pytest
import yaml

from infra.targets.kubernetes.config import AWS_CLI_IMAGE
from infra.targets.kubernetes.weights import TEMPLATES
from tests.support.kubernetes_stacks import K8S_STACK

ZERO = {"engine": "keda", "min_replicas": 0, "max_replicas": 2, "scale_to_zero": True}
BAD = [
    ({"cache_size": "100GB"}, "target.cache_size", "not a Kubernetes quantity"),
    ({"memory": "64 GB"}, "target.memory", "not a Kubernetes quantity"),
    ({"namespace": "Inference_NS"}, "target.namespace", "Inference_NS"),
    ({"labels": {"team": "ml platform"}}, "target.labels.team", "invalid label value"),
    ({"labels": {"Example.COM/team": "ml"}}, "target.labels.Example.COM/team", "invalid label key"),
    ({"node_selector": {"pool": "-h100"}}, "target.node_selector.pool", "invalid label value"),
    ({"gpu_product": "NVIDIA H100"}, "target.gpu_product", "NVIDIA H100"),
    ({"tolerations": [{"key": "nvidia.com/gpu!"}]}, "target.tolerations[0].key", "invalid taint key"),
    ({"context": None}, "target.context", "ambient"),
    ({"autoscaling": {"engine": "hpa", "min_replicas": 0, "max_replicas": 2}}, "target.autoscaling", "scale_to_zero"),
    ({"autoscaling": {"engine": "hpa", "cooldown_s": 7200}}, "target.autoscaling.cooldown_s", "at most 3600"),
    ({"autoscaling": None, "replicas": 2, "pdb_min_available": 3}, "target.pdb_min_available", "drain"),
    ({"autoscaling": ZERO, "gateway": None}, "target.autoscaling.scale_to_zero", "needs target.gateway"),
    ({"autoscaling": ZERO, "gateway": {"hold_s": 0}}, "target.gateway.hold_s", "503 at once"),
]


def _stack(tmp_path, change: dict) -> str:
    doc = yaml.safe_load(K8S_STACK.read_text())
    target = doc["config"]["inferry:deployment"]["target"]
    for key, value in change.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value
    path = tmp_path / "Pulumi.case.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@pytest.mark.parametrize("change,path,words", BAD, ids=[b[1] for b in BAD])
def test_validate_rejects_with_field_and_reason(cli, tmp_path, change, path, words):
    result = cli("validate", _stack(tmp_path, change))
    assert result.exit_code == 1
    line = next((ln for ln in result.output.splitlines() if f"• {path}" in ln), None)
    assert line is not None, result.output
    assert words in line and "Traceback" not in result.output


def test_the_printed_fix_for_scale_to_zero_without_a_gateway_validates(cli, tmp_path):
    result = cli("validate", _stack(tmp_path, {"autoscaling": ZERO, "gateway": None}))
    hint = next(ln for ln in result.output.splitlines() if "target.autoscaling.scale_to_zero" in ln)
    assert "add `gateway: {hold_s: 300}` under target" in result.output, result.output
    fixed = yaml.safe_load("{hold_s: 300}")  # the text the hint quotes, as YAML
    result = cli("validate", _stack(tmp_path, {"autoscaling": ZERO, "gateway": fixed}))
    assert result.exit_code == 0 and hint not in result.output, result.output


def test_an_ingress_without_the_gateway_is_warned_and_the_printed_fix_clears_it(cli, tmp_path):
    result = cli("validate", _stack(tmp_path, {"ingress": {"host": "llm.example.eu", "tls_secret": "llm-tls"},
                                               "gateway": None}))
    assert result.exit_code == 0, result.output
    line = next((ln for ln in result.output.splitlines() if "target.ingress" in ln), None)
    assert line is not None and "every path it serves is public" in line, result.output
    assert "add `gateway: {}` under target" in result.output
    fixed = yaml.safe_load("{}")  # the text the hint quotes, as YAML
    result = cli("validate", _stack(tmp_path, {"ingress": {"host": "llm.example.eu", "tls_secret": "llm-tls"},
                                               "gateway": fixed}))
    assert result.exit_code == 0 and "target.ingress" not in result.output, result.output


def test_a_store_s5cmd_cannot_address_asks_for_an_aws_cli_image_and_the_printed_fix_validates(cli, tmp_path):
    doc = yaml.safe_load(K8S_STACK.read_text())
    doc["config"]["inferry:deployment"]["storage"]["addressing_style"] = "virtual"
    path = tmp_path / "Pulumi.case.yaml"
    path.write_text(yaml.safe_dump(doc))
    result = cli("validate", str(path))
    line = next((ln for ln in result.output.splitlines() if "• target.fetch_image" in ln), "")
    assert result.exit_code == 1 and "path-style only" in line, result.output
    fix = re.search(r"set target.fetch_image to an image with the aws CLI, such as (\S+)", result.output)
    assert fix is not None, result.output
    doc["config"]["inferry:deployment"]["target"]["fetch_image"] = fix.group(1)
    path.write_text(yaml.safe_dump(doc))
    result = cli("validate", str(path))
    assert result.exit_code == 0 and "target.fetch_image" not in result.output, result.output


def test_an_adapter_prefix_s5cmd_would_read_as_a_wildcard_is_named_and_the_fix_validates(cli, tmp_path):
    # Every prefix the pod fetches, not the model's alone: an adapter's comes through the same fetch image.
    doc = yaml.safe_load(K8S_STACK.read_text())
    doc["config"]["inferry:deployment"]["model"]["adapters"] = [{"name": "sql", "weights": "adapters/sql?v2",
                                                                  "rank": 8}]
    path = tmp_path / "Pulumi.case.yaml"
    path.write_text(yaml.safe_dump(doc))
    result = cli("validate", str(path))
    line = next((ln for ln in result.output.splitlines() if "• target.fetch_image" in ln), "")
    assert result.exit_code == 1 and "'adapters/sql?v2'" in line and "wildcards" in line, result.output
    doc["config"]["inferry:deployment"]["target"]["fetch_image"] = AWS_CLI_IMAGE
    path.write_text(yaml.safe_dump(doc))
    result = cli("validate", str(path))
    assert result.exit_code == 0 and "target.fetch_image" not in result.output, result.output


def test_the_fetch_script_names_the_same_aws_cli_image_as_validate():
    assert f"such as {AWS_CLI_IMAGE}\"" in (TEMPLATES / "store.sh").read_text()


def test_validate_accepts_the_bundled_kubernetes_stack(cli):
    result = cli("validate", str(K8S_STACK))
    assert result.exit_code == 0, result.output
