"""A stand-in cloud provider for examples/: `GpuVm`, a dynamic resource that allocates a test host from a pool,
and `GpuCluster` (my_cloud_cluster.py), whose kubeconfig is a real cluster's credentials.

The test makes the hosts (tests/support/hosts) and hands their details over in a JSON file named by
MY_CLOUD_POOL; a VM's create "allocates" pool[host_index] (a changed host_index is another VM: replaced), its
delete "releases" it. Each call is appended to the JSON-lines file MY_CLOUD_EVENTS with what the host still
served at that moment. Standalone (neither inferry nor the tests): the program and Pulumi's provider host import it
from PYTHONPATH, as they would a provider package.
"""
from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider

from my_cloud_cluster import GpuCluster

__all__ = ["GpuCluster", "GpuVm", "serving"]

POOL, EVENTS = "MY_CLOUD_POOL", "MY_CLOUD_EVENTS"
ENGINE_PORT = 8000
OUTPUTS = ("address", "user", "host_key", "private_key")


def _pool() -> list[dict[str, str]]:
    with open(os.environ[POOL]) as f:
        return json.load(f)


def serving(address: str, port: int = ENGINE_PORT) -> bool:
    """Whether an engine answers on the host (any HTTP status counts: a 401 is an engine too)."""
    try:
        urllib.request.urlopen(f"http://{address}:{port}/health", timeout=2).close()
        return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def _record(event: str, index: int, address: str) -> None:
    line = {"event": event, "index": index, "address": address, "engine": serving(address), "time": time.time()}
    with open(os.environ[EVENTS], "a") as f:
        f.write(json.dumps(line) + "\n")


class VmProvider(ResourceProvider):
    """Allocate and release pool hosts; host_index picks the host, so changing it replaces the VM."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        """Allocate pool[host_index]: its address, SSH user, host key and the key that reaches it."""
        index = int(props["host_index"])
        vm = _pool()[index]
        _record("allocate", index, vm["address"])
        return CreateResult(id_=f"vm-{index}", outs={"host_index": index, **{k: vm[k] for k in OUTPUTS}})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """Another index is another machine: replaced (the new one first, as a cloud's VM usually is)."""
        changed = int(olds["host_index"]) != int(news["host_index"])
        return DiffResult(changes=changed, replaces=["host_index"] if changed else [], stables=list(OUTPUTS),
                          delete_before_replace=False)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """Release the host (recorded with whether an engine still serves there)."""
        _record("release", int(props["host_index"]), props["address"])


class GpuVm(Resource, module="my-cloud", name="GpuVm"):
    """A GPU VM: its address, SSH user, host key (known_hosts form, no address) and private key (secret)."""

    address: pulumi.Output[str]
    user: pulumi.Output[str]
    host_key: pulumi.Output[str]
    private_key: pulumi.Output[str]

    def __init__(self, name: str, host_index: pulumi.Input[int] = 0, opts: pulumi.ResourceOptions | None = None):
        secret = pulumi.ResourceOptions(additional_secret_outputs=["private_key"])
        super().__init__(VmProvider(), name, {"host_index": host_index, **{k: None for k in OUTPUTS}},
                         pulumi.ResourceOptions.merge(opts, secret))
