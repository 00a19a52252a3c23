"""The public API is typed: mypy passes on inferry/ and on the example programs written against it."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.component
# One mypy run each: every example is a program named __main__, which one run takes for a duplicate module.
EXAMPLES = ("vms-from-my-provider", "cluster-from-my-program")


@pytest.mark.parametrize("example", EXAMPLES)
def test_mypy_passes_on_the_public_api_and_the_examples(example):
    # pyproject's [tool.mypy]: infra.component is checked, the rest of infra/ only read for its types
    r = subprocess.run([sys.executable, "-m", "mypy", f"examples/{example}", "inferry"], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_example_is_typed():
    assert sorted(p.name for p in (ROOT / "examples").iterdir() if p.is_dir()) == sorted(EXAMPLES)
