"""The engine tier's venvs and verdict scripts: an engine's own code run on command lines, from the tests."""
from __future__ import annotations

import json
import subprocess

from tests.conftest import ROOT


def tier_python(engine: str) -> str:
    """The engine's venv python (built and cached by scripts/engine_tier.sh: a test installs what it needs)."""
    out = subprocess.run(["bash", str(ROOT / "scripts" / "engine_tier.sh"), engine], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


def run_verdict(python: str, script, *args: str, argvs: list[list[str]] | None = None):
    """The verdict script's JSON answer: for argvs on stdin, or for a mode flag (--options, --values)."""
    out = subprocess.run([python, str(script), *args], input=json.dumps(argvs) if argvs is not None else None,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)
