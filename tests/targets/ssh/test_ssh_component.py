"""The SshTarget component under Pulumi's mocks: one child per step and host, secrets only as secret inputs.

Mocks, because each resource's inputs are seen as the component built them, secret or not, for many shapes
of a stack in seconds; tests/targets/ssh/test_real_engine_ssh.py deploys one through the real engine."""
from __future__ import annotations

import json
import runpy

import pulumi

from tests.conftest import ROOT
from tests.support.harness import SECRET_SIG, RecordingMocks, run, stack_config

STACK = ROOT / "stacks" / "Pulumi.eu-ssh.yaml"
STEP = "pulumi-python:dynamic/inferry:Ssh"
SECRET_INPUTS = {"private_key", "access_key_id", "secret_access_key", "secret_values", "api_key"}


def endpoints(args: pulumi.runtime.MockResourceArgs) -> dict:
    """What the providers would output: an endpoint per service and for the gateway (their own arguments')."""
    from infra.targets.ssh.args import gateway_args, service_args

    if args.typ == STEP + "Service":
        return {"endpoint": service_args(args.inputs).endpoint}
    if args.typ == STEP + "Gateway":
        return {"endpoint": gateway_args(args.inputs).endpoint}
    return {}


def _run_eu_ssh(rollout: str | None = None) -> tuple[RecordingMocks, dict, dict[str, str], dict[str, list[str]]]:
    """(mocks, exports, parent by name, depends_on names by name) of the eu-ssh program."""
    parents: dict[str, str] = {}
    after: dict[str, list[str]] = {}

    def record(args: pulumi.ResourceTransformationArgs):
        parents[args.name] = args.opts.parent._name if args.opts and args.opts.parent else None
        after[args.name] = sorted(r._name for r in (args.opts.depends_on or []) if isinstance(r, pulumi.Resource))
        return None

    def program():
        pulumi.runtime.register_stack_transformation(record)
        runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")

    config, secret = stack_config(STACK)
    if rollout:
        doc = json.loads(config["inferry:deployment"])
        doc["target"]["rollout"] = rollout
        config["inferry:deployment"] = json.dumps(doc)
    mocks, exports = run(program, config, secret, "eu-ssh", RecordingMocks(outputs_for=endpoints))
    return mocks, exports, parents, after


def test_no_chain_of_hosts_the_rollout_travels_with_every_step():
    """Rolling restarts take turns inside the provider process (rollout.py); no service waits on another's step:
    a no-op's checks and a first create's starts run on every host at once."""
    for rollout, rolling in ((None, True), ("parallel", False)):
        mocks, _, _, after = _run_eu_ssh(rollout)
        services = sorted(n for n in after if n.endswith("-service"))
        assert len(services) == 2 and not any(s in after[t] for s in services for t in services)
        steps = [r for r in mocks.resources if r.type.endswith("SshService")]
        assert len(steps) == 2 and {r.inputs["__rolling"] for r in steps} == {rolling}, rollout


def test_eu_ssh_stack_builds_every_step_under_the_component():
    mocks, exports, parents, _ = _run_eu_ssh()
    steps = [r for r in mocks.resources if r.type.startswith(STEP)]
    kinds = sorted(r.type.removeprefix(STEP[:-3]) for r in steps)
    assert kinds == ["SshGateway"] + ["SshHost"] * 2 + ["SshService"] * 2 + ["SshWeights"] * 2
    assert {parents[r.name] for r in steps} == {"ssh"}
    assert exports["endpoint"] == "https://llm.example-gpu.eu/v1"  # the one public door
    assert exports["endpoints"] == ["https://llm.example-gpu.eu/v1"]  # the replicas are private: not endpoints
    for r in steps:
        for k in SECRET_INPUTS & set(r.inputs):
            assert isinstance(r.inputs[k], dict) and r.inputs[k].get(SECRET_SIG), (r.name, k)
        plain = json.dumps({k: v for k, v in r.inputs.items() if k not in SECRET_INPUTS and k != "__provider"})
        assert "test-secret-" not in plain, r.name
    svc = next(r for r in steps if r.type.endswith("SshService"))
    paths = {f["path"] for f in svc.inputs["files"]}
    assert "/etc/inferry/compose.yaml" in paths
    assert svc.inputs["runtime"] == "docker" and svc.inputs["private_key_ref"] == {"config": "sshPrivateKey"}


def test_a_weak_key_fails_the_program_before_any_service_or_gateway_step_runs():
    """The gateway's 128-bit check runs on the secret values every service step and the gateway consume (a
    program run that fails here would leave Pulumi's mock runtime failing the next test: the check is called
    as the component calls it)."""
    import pytest as _pytest

    from infra.targets.ssh.component import _edge_checked

    weak = {"serving.api_key": "sk-test-" + "7" * 24}
    with _pytest.raises(pulumi.RunError) as e:
        _edge_checked(weak)
    assert "serving.api_key" in str(e.value) and "128" in str(e.value) and "7777" not in str(e.value)
    strong = {"serving.api_key": "sk-test-3c8e1a6f9b2d47e0c5a8f1d3b6e9c207"}
    assert _edge_checked(strong) == strong
