"""Offline schema checks for Kubernetes manifests: built-in kinds via kubernetes-validate, CRs via their CRD schemas."""
from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

K8S_VERSION = "1.33.0"  # the one pinned Kubernetes schema version every test validates against
CRDS = Path(__file__).resolve().parents[1] / "schemas" / "crds"
CUSTOM = {("keda.sh/v1alpha1", "ScaledObject"), ("monitoring.coreos.com/v1", "ServiceMonitor")}


def _strict(node: Any) -> Any:
    """CRD structural schema -> JSON Schema that rejects unknown fields (API server strict field validation)."""
    if isinstance(node, dict):
        out = {k: _strict(v) for k, v in node.items() if not k.startswith("x-kubernetes-") and k != "default"}
        if node.get("x-kubernetes-int-or-string"):
            out.pop("type", None)
            out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        if "properties" in node and "additionalProperties" not in node \
                and not node.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_strict(v) for v in node]
    return node


@functools.cache
def crd_schemas() -> dict[tuple[str, str], dict]:
    """(apiVersion, kind) -> strict JSON schema, from tests/schemas/crds/*.yaml."""
    out = {}
    for path in sorted(CRDS.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        out[(doc["apiVersion"], doc["kind"])] = _strict(copy.deepcopy(doc["openAPIV3Schema"]))
    return out


def validate(manifest: dict) -> None:
    """Raise if the manifest is not valid: strict OpenAPI for built-in kinds, the CRD schema for CRs."""
    key = (manifest.get("apiVersion"), manifest.get("kind"))
    if key not in CUSTOM:
        kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)
        return
    jsonschema.validate(manifest, crd_schemas()[key])
    # ObjectMeta of a CR is validated as the API server does for any object.
    kubernetes_validate.validate({"apiVersion": "v1", "kind": "ConfigMap", "metadata": manifest["metadata"]},
                                 K8S_VERSION, strict=True)
