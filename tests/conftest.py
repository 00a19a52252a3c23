"""Shared fixtures: the project root, example stacks, a CLI runner."""
from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
STACKS = sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))
pytest_plugins = ["tests.servers.fixtures", "tests.hosts.fixtures"]


@pytest.fixture
def cli():
    """Invoke the inferry CLI in-process: cli(args...) -> Result."""
    from cli.main import app

    runner = CliRunner()
    return lambda *args, **kw: runner.invoke(app, list(args), **kw)
