"""The Pulumi program runs the same fit check: an infeasible stack fails before any resource exists."""
from __future__ import annotations

import json

import pulumi
import pytest

from infra.errors import SizingError
from tests.conftest import STACKS
from tests.support.harness import run, stack_config


def _config(**engine_changes):
    config, secret = stack_config(STACKS[0])
    dep = json.loads(config["inferry:deployment"])
    dep["model"]["name"] = "llama-3.1-405b-instruct"
    dep["engine"].update(engine_changes)
    config["inferry:deployment"] = json.dumps(dep)
    return config, secret


def test_infeasible_stack_fails_the_program():
    from infra.program import main

    config, secret = _config()
    with pytest.raises(pulumi.RunError):
        mocks, _ = run(main, config, secret)


def test_build_raises_sizing_error_with_the_reason_and_a_fix():
    from infra.program import build
    from infra.stack.stackfile import load_from_pulumi

    config, secret = _config()
    seen: list[SizingError] = []

    def program():
        try:
            build(load_from_pulumi())
        except SizingError as e:
            seen.append(e)

    mocks, _ = run(program, config, secret)
    assert seen and "exceed" in seen[0].message and seen[0].fix
    assert mocks.resources == [] or all(r.type.startswith("pulumi:") for r in mocks.resources)
