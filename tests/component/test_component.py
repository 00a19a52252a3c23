"""The Deployment component under Pulumi's mocks: Inputs from other resources, checks before anything is created."""
from __future__ import annotations

import asyncio
import subprocess
import sys

import pulumi
import pytest

from inferry import ConfigError, Deployment, DeploymentArgs, SshHostArgs
from tests.conftest import ROOT
from tests.support.harness import RecordingMocks, resolve, run

pytestmark = pytest.mark.component


def args(*hosts: SshHostArgs, **changes) -> DeploymentArgs:
    """A two-section-per-line SSH deployment of the test model; changes replace whole sections."""
    sections = dict(
        model={"name": "llama-3.1-8b-instruct", "weights": "llama-3.1-8b-instruct"},
        engine={"kind": "vllm", "max_model_len": 8192},
        target={"kind": "ssh", "hosts": list(hosts), "private_key": "PRIVATE KEY", "trust_on_first_use": True},
        storage={"endpoint": "https://s3.example.com", "region": "eu", "bucket": "weights",
                 "access_key_id": "AK", "secret_access_key": "SK"},
        provider={"name": "cloud", "region": "eu", "gpu": "H100-80GB", "price_per_gpu_hour": 2.0},
        serving={"api_key": "sk-test"},
    )
    return DeploymentArgs(**{**sections, **changes})  # type: ignore[arg-type]


class Vm(pulumi.CustomResource):
    """A stand-in for the user's VM resource (another provider's): its address is an Output."""

    address: pulumi.Output[str]

    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("test:index:Vm", name, {"address": None}, opts)


def vm_mocks(address: str | None = "10.0.0.5") -> RecordingMocks:
    """Mocks where every Vm gets this address (None: unknown, as in a preview)."""
    return RecordingMocks(outputs_for=lambda a: {"address": address} if a.typ == "test:index:Vm" else {})


def unknown() -> pulumi.Output:
    """An Output whose value a preview does not know."""
    value, known = asyncio.get_event_loop().create_future(), asyncio.get_event_loop().create_future()
    value.set_result(None)
    known.set_result(False)
    return pulumi.Output(set(), value, known)


def test_host_address_from_another_resource_reaches_every_step():
    seen = {}

    def program():
        vm = Vm("vm")
        dep = Deployment("llm", args({"address": vm.address, "name": "gpu-1", "user": "ubuntu"}))
        seen.update(dep=dep)
        pulumi.export("endpoint", dep.endpoint)
        pulumi.export("fits", dep.fits)
        pulumi.export("usd", dep.usd_per_hour)
        pulumi.export("cpm", dep.cpm_usd)
        pulumi.export("model", dep.served_model)
        pulumi.export("weights", dep.weights)

    mocks, exports = run(program, {}, mocks=vm_mocks())
    names = [r.name for r in mocks.resources]
    assert {"llm-weights-bucket", "llm-ssh-gpu-1-host", "llm-ssh-gpu-1-weights", "llm-ssh-gpu-1-service"} <= set(names)
    host = next(r for r in mocks.resources if r.name == "llm-ssh-gpu-1-host")
    assert host.inputs["conn"]["address"] == "10.0.0.5" and host.inputs["conn"]["user"] == "ubuntu"
    assert not any("inferry-late" in repr(r.inputs) for r in mocks.resources)
    assert exports["fits"] is True and exports["usd"] == pytest.approx(2.0) and exports["cpm"] > 0
    assert exports["model"] == "llama-3.1-8b-instruct"
    assert exports["weights"] == "s3://weights/llama-3.1-8b-instruct"


def test_bucket_and_endpoint_from_other_resources():
    def program():
        vm = Vm("store")
        storage = {"endpoint": vm.address.apply(lambda a: f"http://{a}:9000"), "region": "eu",
                   "bucket": vm.address.apply(lambda _: "made-by-my-program"), "access_key_id": "AK",
                   "secret_access_key": "SK"}
        dep = Deployment("llm", args({"address": "10.0.0.7"}, storage=storage))
        pulumi.export("weights", dep.weights)
        pulumi.export("weights_endpoint", dep.weights_endpoint)

    mocks, exports = run(program, {}, mocks=vm_mocks())
    bucket = next(r for r in mocks.resources if r.type.endswith("inferry:Bucket"))
    assert bucket.inputs["bucket"] == "made-by-my-program" and bucket.inputs["endpoint"] == "http://10.0.0.5:9000"
    assert exports == {"weights": "s3://made-by-my-program/llama-3.1-8b-instruct",
                       "weights_endpoint": "http://10.0.0.5:9000"}


def test_every_problem_on_plain_values_is_one_error_at_construction():
    seen: list[ConfigError] = []

    def program():
        try:
            Deployment("llm", args({"address": unknown()}, serving={"api_key": "k", "port": 0},
                                   provider={"name": "c", "region": "eu", "gpu": "H100-80GB",
                                             "price_per_gpu_hour": -1.0}))
        except ConfigError as e:
            seen.append(e)

    mocks, _ = run(program, {}, mocks=vm_mocks())
    assert seen, "the component must refuse the deployment"
    assert set(seen[0].paths) >= {"target.hosts[0].name", "serving.port", "provider.price_per_gpu_hour"}
    assert mocks.resources == []  # nothing registered, not even the component


def test_a_deployment_validate_refuses_is_refused_with_its_bullet():
    with pytest.raises(ConfigError) as e:
        run(lambda: Deployment("llm", args({"address": "10.0.0.7"}, model={"name": "llama-3.1-405b-instruct",
                                                                          "weights": "m"})), {})
    assert "provider.gpu" in e.value.paths  # sizing: 405B does not fit one H100, as `inferry validate` says


def test_preview_with_an_unknown_address_does_not_fail():
    def program():
        dep = Deployment("llm", args({"address": unknown(), "name": "gpu-1"}))
        pulumi.export("model", dep.served_model)

    mocks = vm_mocks(None)
    pulumi.runtime.set_mocks(mocks, project="inferry", stack="test", preview=True)
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    _sync_await(run_pulumi_func(program))
    host = next(r for r in mocks.resources if r.name == "llm-ssh-gpu-1-host")
    assert isinstance(host.inputs["conn"], pulumi.output.Unknown)  # unknown until the VM exists


def test_opts_parent_and_children_parented_to_the_component():
    seen = {}

    def program():
        outer = pulumi.ComponentResource("my:index:Stack", "outer")
        dep = Deployment("llm", args({"address": "10.0.0.7"}), pulumi.ResourceOptions(parent=outer))
        seen.update(outer=outer, dep=dep)

    run(program, {})
    dep, outer = seen["dep"], seen["outer"]
    assert dep in outer._childResources
    kids = {type(c).__name__ for c in dep._childResources}
    assert kids == {"WeightStore", "SshTarget"}
    assert resolve(dep.urn).endswith("my:index:Stack$inferry:index:Deployment::llm")


def refused_late_address() -> None:
    """Run a program whose VM's address resolves to a bad value; print the error and the host steps made."""
    def program():
        vm = Vm("vm")
        Deployment("llm", args({"address": vm.address, "name": "gpu-1"}))

    mocks = vm_mocks("not an address!")
    try:
        run(program, {}, mocks=mocks)
    except Exception as e:  # noqa: BLE001 - printed for the test to read
        print("refused:", e)
    print("host steps:", len([r for r in mocks.resources if r.type.endswith("inferry:SshHost")]))


def test_an_address_that_resolves_to_a_bad_value_fails_before_the_host_step():
    # In a process of its own: CPython 3.11.7 leaves its C recursion counter off after this error unwinds
    # through Pulumi's coroutines, and a later ast.parse in the same process fails (SystemError).
    code = "from tests.component.test_component import refused_late_address as f; f()"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120).stdout
    assert "refused:" in out and "target.hosts[0].address: not an allowed value" in out, out
    assert "host steps: 0" in out, out


def test_only_a_components_key_is_kept_as_an_output_of_the_ssh_steps():
    from infra.targets.ssh.providers import kept_key

    # the component's stand-in reference: no later call could get the key back, so state keeps it (secret)
    assert kept_key({"private_key": "KEY", "private_key_ref": {"env": "INFERRY_SSH_PRIVATE_KEY"}}) == {
        "private_key": "KEY"}
    # a stack file's reference still gives it back: the key stays out of state, as before
    assert kept_key({"private_key": "KEY", "private_key_ref": {"config": "sshPrivateKey"}}) == {}
    assert kept_key({"private_key": "KEY", "private_key_ref": {"env": "MY_KEY"}}) == {}
