"""The Pulumi program runs the same fit check: an infeasible stack fails before any resource exists.

Under Pulumi's mocks, so each case is a fraction of a second and the error is the program's own exception
(the real engine's preview of one is in tests/targets/ssh/test_real_engine_ssh.py)."""
from __future__ import annotations

import json

import pulumi
import pytest

from infra.errors import ConfigError
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


def test_build_refuses_a_stack_that_does_not_fit_with_validates_bullet():
    from infra.program import build
    from infra.stack.stackfile import load_from_pulumi

    config, secret = _config()
    seen: list[ConfigError] = []

    def program():
        try:
            build(load_from_pulumi())
        except ConfigError as e:
            seen.append(e)

    mocks, _ = run(program, config, secret)
    assert seen and seen[0].paths == ["provider.gpu"]
    assert "exceed" in seen[0].problems[0].message and "set engine.tensor_parallel_size" in seen[0].problems[0].hint
    assert mocks.resources == [] or all(r.type.startswith("pulumi:") for r in mocks.resources)
