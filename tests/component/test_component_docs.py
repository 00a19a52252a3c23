"""docs/component.md's programs run as written, under Pulumi's mocks, with stand-ins for `my_cloud`."""
from __future__ import annotations

import re
import sys
import types

import pulumi
import pytest

from tests.conftest import ROOT
from tests.support.harness import RecordingMocks, run

pytestmark = pytest.mark.component

DOC = ROOT / "docs" / "component.md"
# The harness runs project "inferry": pulumi.Config() reads these.
SECRETS = {f"inferry:{k}": f"secret-{k}" for k in ("sshPrivateKey", "s3AccessKey", "s3SecretKey")}
SECRETS["inferry:apiKey"] = "3f7a9c1e5b2d8046af13c9e7d5b0a2f4"  # the gateway takes keys of 128 bits


def programs() -> list[str]:
    """Every complete program on the page (the Python blocks that start with a docstring)."""
    return [b for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S) if b.startswith('"""')]


def my_cloud() -> types.ModuleType:
    """Stand-ins for a provider's VM and cluster: resources whose address / kubeconfig are Outputs."""
    mod = types.ModuleType("my_cloud")

    class GpuVm(pulumi.CustomResource):
        public_ip: pulumi.Output[str]
        private_ip: pulumi.Output[str]

        def __init__(self, name: str, gpu: str):
            super().__init__("my-cloud:index:GpuVm", name, {"gpu": gpu, "public_ip": None, "private_ip": None})

    class GpuCluster(pulumi.CustomResource):
        kubeconfig: pulumi.Output[str]

        def __init__(self, name: str, node_gpu: str, nodes: int):
            super().__init__("my-cloud:index:GpuCluster", name, {"node_gpu": node_gpu, "nodes": nodes,
                                                                  "kubeconfig": None})

    mod.GpuVm, mod.GpuCluster = GpuVm, GpuCluster  # type: ignore[attr-defined]
    return mod


def outputs(args) -> dict:
    """The stand-ins' outputs: an address per VM, a kubeconfig's contents for the cluster."""
    if args.typ == "my-cloud:index:GpuVm":
        return {"public_ip": f"203.0.113.{10 + int(args.name[-1])}", "private_ip": f"10.0.0.{10 + int(args.name[-1])}"}
    if args.typ == "my-cloud:index:GpuCluster":
        return {"kubeconfig": "apiVersion: v1\nkind: Config\nclusters: []\n"}
    return {}


@pytest.fixture(autouse=True)
def stand_ins(monkeypatch):
    monkeypatch.setitem(sys.modules, "my_cloud", my_cloud())


def test_the_page_has_both_programs():
    assert len(programs()) == 2


def test_vms_from_my_clouds_provider():
    mocks = RecordingMocks(outputs_for=outputs)
    mocks, exports = run(lambda: exec(programs()[0], {}), SECRETS, list(SECRETS), mocks=mocks)
    hosts = {r.name: r.inputs["conn"]["address"] for r in mocks.resources if r.type.endswith("inferry:SshHost")}
    assert hosts == {"llm-ssh-gpu-1-host": "203.0.113.11", "llm-ssh-gpu-2-host": "203.0.113.12"}
    gw = next(r for r in mocks.resources if r.type.endswith("inferry:SshGateway"))
    assert gw.inputs["plan"]["upstreams"] == ["127.0.0.1:8000", "10.0.0.12:8000"]  # never a public address
    assert gw.inputs["plan"]["domains"] == ["llm.example.com"]
    assert exports["cost_per_million_tokens"] > 0


def test_a_cluster_from_my_program():
    mocks = RecordingMocks(outputs_for=outputs)
    mocks, _ = run(lambda: exec(programs()[1], {}), SECRETS, list(SECRETS), mocks=mocks)
    provider = next(r for r in mocks.resources if r.type == "pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"].startswith("apiVersion: v1")
    assert any(r.name == "llm-kubernetes-provider" for r in mocks.resources)
    assert mocks.of_type("kubernetes:apps/v1:Deployment")
