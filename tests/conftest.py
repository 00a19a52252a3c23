"""Shared fixtures: the project root, example stacks, a CLI runner."""
from __future__ import annotations

from pathlib import Path

import hypothesis  # noqa: F401  (see below)
import pytest
from typer.testing import CliRunner

from infra.checks import register_checks

ROOT = Path(__file__).resolve().parent.parent
# hypothesis is imported at collection on purpose: otherwise its pytest plugin imports it at session end,
# where pytest's assertion rewriting of it intermittently hit CPython 3.11's "AST constructor recursion
# depth mismatch" SystemError (seen on subsets of the suite that do not use hypothesis).
# The bundled examples, by name: a user's own stacks in stacks/ (inferry init writes there) are not the suite's.
BUNDLED = ("aws-k8s", "eu-ssh", "staging")
STACKS = [ROOT / "stacks" / f"Pulumi.{name}.yaml" for name in BUNDLED]
# The engine sections and the rooms' checks, registered as the CLI and the Pulumi program register them: at
# import, since test modules load stacks while they are collected.
register_checks()
pytest_plugins = ["tests.support.servers.fixtures", "tests.support.hosts.fixtures", "tests.support.cluster",
                  "tests.support.wheel", "tests.support.markers", "tests.support.node"]


@pytest.fixture(scope="session", autouse=True)
def _validate_checks():
    """The rooms' validate checks, registered as the CLI and the Pulumi program register them."""
    from infra.checks import register_checks

    register_checks()


@pytest.fixture
def cli():
    """Invoke the inferry CLI in-process: cli(args...) -> Result."""
    from cli.main import app

    runner = CliRunner()
    return lambda *args, **kw: runner.invoke(app, list(args), **kw)
