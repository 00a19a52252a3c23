"""The public API is typed: mypy passes on inferry/ and on the example programs written against it."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.component


def test_mypy_passes_on_the_public_api_and_the_examples():
    # pyproject's [tool.mypy]: infra.component is checked, the rest of infra/ only read for its types
    r = subprocess.run([sys.executable, "-m", "mypy", "examples/vms-from-my-provider", "inferry"], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
