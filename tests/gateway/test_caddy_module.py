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


def test_build_caddy_without_go_names_what_to_install_and_writes_nothing(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    r = cli("gateway", "build-caddy", "-o", str(tmp_path / "caddy"))
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert "needs Go" in r.output and "https://go.dev/dl" in r.output
    assert not list(tmp_path.iterdir())


def test_build_caddy_refuses_an_arch_it_does_not_build(cli, tmp_path):
    r = cli("gateway", "build-caddy", "--arch", "x86_64", "-o", str(tmp_path / "caddy"))
    assert r.exit_code == 1 and "--arch 'x86_64'" in r.output and "amd64, arm64" in r.output


def test_a_failed_build_says_why_and_leaves_the_old_binary_whole(cli, tmp_path, monkeypatch):
    """No module proxy and an empty module cache: Go cannot fetch Caddy; the binary already there is kept."""
    old = tmp_path / "caddy"
    old.write_bytes(b"the build from before")
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "modcache"))
    monkeypatch.setenv("GOPROXY", "off")
    r = cli("gateway", "build-caddy", "-o", str(old))
    assert r.exit_code == 1 and "go build failed" in r.output and "GOPROXY" in r.output, r.output
    assert old.read_bytes() == b"the build from before"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["caddy", "modcache"]
