"""inferry's Caddy build (caddy/): its limits module's own Go tests, and the binary the suite runs carries it."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.realengine import TOOLS_BIN

pytestmark = pytest.mark.gateway
SOURCE = Path(__file__).resolve().parents[2] / "caddy"


def test_the_limits_module_passes_its_go_tests():
    r = subprocess.run(["go", "test", "-count=1", "./..."], cwd=SOURCE, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-buildvcs=false"}, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_suites_caddy_is_inferrys_build_with_the_limits_module():
    out = subprocess.run([str(TOOLS_BIN / "caddy"), "list-modules"], capture_output=True, text=True, check=True,
                         timeout=30).stdout.split()
    assert "http.handlers.inferry_limits" in out and "http.handlers.reverse_proxy" in out
