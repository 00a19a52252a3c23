"""CLI start-up: each command is dispatched to the module that registers it, and imports only what it needs."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cli.main import COMMANDS, MODULES, build
from tests.conftest import ROOT

HEAVY = ("boto3", "pulumi", "jinja2", "rich", "infra.stack.config", "infra.lifecycle.deployer", "botocore", "pydantic")
# Runs the console-script entry point as `inferry ARGS` does, then reports which heavy modules it imported.
PROBE = """
import json, sys
sys.argv = ["inferry", *json.loads(sys.argv[1])]
from cli.main import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in %r if m in sys.modules)), file=sys.__stderr__)
""" % (HEAVY,)


def _imported(*args: str, env: dict | None = None) -> list[str]:
    p = subprocess.run([sys.executable, "-c", PROBE, json.dumps(list(args))], cwd=ROOT, capture_output=True,
                       text=True, env=env, timeout=120)
    return json.loads(p.stderr.strip().splitlines()[-1])


def test_every_command_of_the_app_is_dispatched_to_the_module_that_registers_it():
    full = build()
    names = {c.name or c.callback.__name__ for c in full.registered_commands} | {
        g.name for g in full.registered_groups}
    assert set(COMMANDS) == names
    for command, module in COMMANDS.items():
        alone = build((module,))
        mine = {c.name or c.callback.__name__ for c in alone.registered_commands} | {
            g.name for g in alone.registered_groups}
        assert command in mine, f"{command} is not registered by cli.{module}"
    assert set(COMMANDS.values()) == set(MODULES)


@pytest.mark.parametrize("args, absent", [
    (("validate", str(ROOT / "stacks" / "Pulumi.eu-ssh.yaml")),
     {"boto3", "botocore", "pulumi", "jinja2", "rich", "infra.lifecycle.deployer"}),
    (("weights", "pull", "/nonexistent-folder", "--endpoint", "http://127.0.0.1:9", "--bucket", "abc",
      "--prefix", "m"), {"boto3", "pulumi", "jinja2", "infra.stack.config", "infra.lifecycle.deployer", "pydantic"}),
    (("weights", "push", "/nonexistent-folder", "--endpoint", "http://127.0.0.1:9", "--bucket", "abc",
      "--prefix", "m"), {"boto3", "pulumi", "jinja2", "infra.stack.config", "infra.lifecycle.deployer", "pydantic"}),
])
def test_a_command_imports_only_what_it_needs(args, absent, monkeypatch):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}  # gets past the settings, fails on the folder
    found = _imported(*args, env=env)
    assert not absent & set(found), f"inferry {args[0]} imported {sorted(absent & set(found))}"


def test_the_full_app_still_imports_everything_for_help():
    assert {"infra.lifecycle.deployer", "infra.stack.config"} <= set(_imported("--help"))
