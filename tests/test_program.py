"""The Pulumi program runs under Pulumi's mocks for every bundled stack (mocks: the Kubernetes ones need no cluster)."""
from __future__ import annotations

import pulumi
import pytest

from tests.conftest import STACKS
from tests.support.harness import run_main


@pytest.mark.parametrize("stack_file", STACKS, ids=lambda p: p.stem)
def test_program_exports_for_every_stack(stack_file):
    mocks, exports = run_main(stack_file)
    assert exports["model"] == "llama-3.1-8b-instruct"
    assert exports["target"] in ("ssh", "kubernetes")


def test_program_refuses_plain_secret(tmp_path):
    from tests.support.harness import run, stack_config
    from infra.program import main

    config, secret = stack_config(STACKS[0])
    with pytest.raises(pulumi.RunError):
        run(main, config, [k for k in secret if not k.endswith("apiKey")])
