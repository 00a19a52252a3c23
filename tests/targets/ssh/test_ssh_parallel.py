"""Replicas side by side: at most target.max_parallel at once; a host's failure names it and hides no other."""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from infra.errors import RemoteError
from tests.support import ssh_direct as ssh_apply
from infra.targets.ssh import host as ssh_host
from infra.targets.ssh import providers
from infra.targets.ssh import service as ssh_service
from infra.targets.ssh import weights as ssh_weights
from infra.targets.ssh.host import HostReport
from infra.targets.ssh.service import ServiceReport
from infra.targets.ssh.weights import WeightsReport
from tests.support.ssh_env import Store, deployment, plan_for

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBQmxZ3pTg1ZZ2w3Px2S0x6bCq8bUq3nY7PwD5l6Jc9f"


@pytest.mark.parametrize("rollout", ["parallel", "rolling"])
def test_bounded_parallelism_and_failures_by_name(monkeypatch, rollout):
    hosts = [SimpleNamespace(address=f"192.0.2.{i}", name=f"gpu-{i}", host_key_line=KEY) for i in range(1, 6)]
    store = Store("http://192.0.2.100:9000", "eu", "ak", "sk")
    d = deployment(hosts, store, max_parallel=2, rollout=rollout)
    running, peak, lock = [0], [0], threading.Lock()

    def host_step(a, key):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.1)
        with lock:
            running[0] -= 1
        if a.conn.name == "gpu-3":
            raise RemoteError("preflight failed: no usable GPU", "use a GPU host", where="host gpu-3")
        return HostReport("Ubuntu 24.04", ["NVIDIA H200"], "580.159.04", "13.0", None, 0)

    monkeypatch.setattr(ssh_host, "ensure_host", host_step)
    monkeypatch.setattr(ssh_weights, "presigned", lambda *a, **k: [])
    monkeypatch.setattr(ssh_weights, "ensure_weights", lambda a, k, e, **kw: WeightsReport(a.model_dir, "d", 0, 0, 0, 0))
    monkeypatch.setattr(ssh_service, "ensure_service", lambda a, k, s, r=None: ServiceReport(a.endpoint, [], False, 0, 0))
    monkeypatch.setattr(ssh_apply, "check_service", lambda a, k, s: SimpleNamespace(restarts_serving=False))
    with pytest.raises(RemoteError) as e:
        ssh_apply.apply(plan_for(d), {"target.private_key": "k", "serving.api_key": "a",
                                      "storage.access_key_id": "ak", "storage.secret_access_key": "sk"})
    assert peak[0] == 2  # host checks and weights run side by side in both rollouts
    text = e.value.render()
    assert "host gpu-3: preflight failed: no usable GPU" in text
    assert "converged: gpu-1 (http://192.0.2.1:8000/v1), gpu-2" in text
    if rollout == "parallel":
        assert "apply failed on 1 of 5 hosts" in text
        assert e.value.outcome.endpoints == [f"http://192.0.2.{i}:8000/v1" for i in (1, 2, 4, 5)]
    else:  # as Pulumi does with the chained services: nothing after the failed host is changed
        assert "apply failed on 3 of 5 hosts" in text
        assert "host gpu-4: engine not changed: the rolling update stopped at host gpu-3" in text
        assert e.value.outcome.endpoints == [f"http://192.0.2.{i}:8000/v1" for i in (1, 2)]


def test_diff_is_honest_about_inputs_and_floats():
    p = providers.ServiceProvider()
    props = {"conn": {"address": "192.0.2.1", "port": 22}, "max_parallel": 8, "spec": {"port": 8000},
             "runtime": "process", "service_dir": "/etc/inferry",  # 192.0.2.1 answers nothing: engine not checked
             "private_key": "k", "secret_values": {"serving.api_key": "a"}}
    outs = {"fingerprint": providers.fingerprint(props), "endpoint": "http://192.0.2.1:8000/v1"}
    as_pulumi_sends = {**props, "max_parallel": 8.0, "spec": {"port": 8000.0}}
    assert p.diff("id", outs, as_pulumi_sends).changes is False
    assert p.diff("id", outs, {**props, "secret_values": {"serving.api_key": "b"}}).changes is True
    moved = p.diff("id", outs, {**props, "conn": {"address": "192.0.2.2", "port": 22}})
    assert moved.changes is True and moved.replaces == ["conn"]
