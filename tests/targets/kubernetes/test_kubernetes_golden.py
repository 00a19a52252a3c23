"""Golden manifests: rendered YAML is deterministic and reviewed (refresh: INFERRY_UPDATE_GOLDEN=1)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from infra.targets.kubernetes.manifests import render
from tests.support.kubernetes_schema import validate
from tests.support.kubernetes_stacks import CASES, deployment, spec_of

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "kubernetes"
UPDATE = os.environ.get("INFERRY_UPDATE_GOLDEN") == "1"


def _render(case: str) -> dict[str, str]:
    d = deployment(case)
    return render(d, spec_of(d), "golden")


# The bundled stack itself is golden in tests/golden/aws-k8s/ (tests/render/test_render.py, via `inferry render`).
@pytest.mark.parametrize("case", sorted(set(CASES) - {"bundled"}))
def test_rendered_manifests_match_golden(case):
    files = _render(case)
    folder = GOLDEN / case
    if UPDATE:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for name, text in files.items():
            (folder / name).write_text(text)
    expected = {p.name: p.read_text() for p in sorted(folder.glob("*.yaml"))}
    assert sorted(files) == sorted(expected), "objects added or removed: review, then regenerate"
    for name, text in files.items():
        assert text == expected[name], f"{case}/{name} changed: review, then INFERRY_UPDATE_GOLDEN=1"


def test_render_is_deterministic_and_reparses_to_valid_objects():
    first, second = _render("scale-to-zero-ingress"), _render("scale-to-zero-ingress")
    assert first == second
    for text in first.values():
        validate(yaml.safe_load(text))


def test_render_never_holds_secret_values(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIA-REAL-LOOKING-VALUE")
    files = _render("bundled")
    secret = yaml.safe_load(next(t for n, t in files.items() if n.endswith("-secrets.yaml")))
    assert all(v.startswith("<redacted: ") for v in secret["stringData"].values())
    # Behind the gateway the client key is only in its Caddy config, in the gateway's own Secret.
    gateway = yaml.safe_load(next(t for n, t in files.items() if "-secret-" in n and "-gateway-" in n))
    assert "Bearer <redacted: secret config inferry:apiKey>" in gateway["stringData"]["caddy.json"]
    assert "AKIA-REAL-LOOKING-VALUE" not in "".join(files.values())
