"""The SSH step providers driven through Pulumi's own provider host (`python -u -m pulumi.dynamic`, gRPC)."""
from __future__ import annotations

import json

from infra.targets.ssh.args import props_of
from infra.targets.ssh.plan import with_depends
from infra.targets.ssh.providers import ServiceProvider, WeightsProvider
from tests.support.pulumi_dynamic_host import DynamicHost
from tests.support.ssh_env import API_KEY, deployment, ops_log, plan_for, weights_store  # noqa: F401

SECRET_INPUTS = ("private_key", "access_key_id", "secret_access_key", "secret_values", "api_key")


def test_weights_and_service_through_the_provider_host(make_hosts, weights_store):
    (h,) = make_hosts(1)
    d = deployment([h], weights_store)
    hp = plan_for(d).hosts[0]
    key_ref = {"private_key_ref": {"config": "sshPrivateKey"}, "max_parallel": 4}
    secret = {"private_key": h.client_key_text, "access_key_id": weights_store.access_key,
              "secret_access_key": weights_store.secret_key}
    with DynamicHost(config={"inferry:sshPrivateKey": h.client_key_text}) as host:
        w = host.create(WeightsProvider(), {**props_of(hp.weights[0]), **key_ref, **secret}, SECRET_INPUTS, "weights")
        svc_in = {**props_of(with_depends(hp.service, w.outs["manifest_sha256"])), **key_ref,
                  "private_key": h.client_key_text, "secret_values": {"serving.api_key": API_KEY}}
        s = host.create(ServiceProvider(), svc_in, SECRET_INPUTS, "service")
        assert s.outs["endpoint"] == f"http://{h.address}:8000/v1" and s.outs["restarts"] == 1
        state = json.dumps([w.outs, s.outs])
        for value in (h.client_key_text.splitlines()[1], API_KEY, weights_store.secret_key, weights_store.access_key):
            assert value not in state  # no secret reaches Pulumi state
        assert not set(SECRET_INPUTS) & (set(w.outs) | set(s.outs))

        assert host.diff(ServiceProvider(), s.id, s.outs, svc_in).changes is False
        assert host.diff(ServiceProvider(), s.id, s.outs, {**svc_in, "secret_values": {"serving.api_key": "rotated"}}).changes is True
        moved = {**svc_in, "conn": {**svc_in["conn"], "address": "10.9.9.9"}}
        assert host.diff(ServiceProvider(), s.id, s.outs, moved).replaces == ["conn"]

        longer = {**svc_in, "health_timeout_s": 30}
        u = host.update(ServiceProvider(), s.id, s.outs, longer, SECRET_INPUTS, "service")
        assert (u.outs["writes"], u.outs["restarts"]) == (0, 0)  # nothing on the host depends on the timeout
        log_before = ops_log(h)

        host.delete(ServiceProvider(), s.id, u.outs, "service")  # outputs only: the key comes from config
        host.delete(WeightsProvider(), w.id, w.outs, "weights")
    assert h.exec("ls -A /etc/inferry 2>/dev/null; pgrep -f supervise.sh").stdout == ""
    assert h.exec("test -e /var/lib/inferry/weights/llama-3.1-8b-instruct || echo gone").stdout == "gone\n"
    assert any(ln.endswith(" restart") for ln in log_before)
