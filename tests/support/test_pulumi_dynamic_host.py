"""The generic dynamic-provider client: a trivial provider through Pulumi's real provider host."""
from __future__ import annotations

import pytest
from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider

from tests.support.pulumi_dynamic_host import DynamicHost, DynamicProviderError


class EchoProvider(ResourceProvider):
    """Echoes its inputs as outputs; fails on demand."""

    def create(self, props):
        if props.get("fail"):
            raise ValueError("asked to fail")
        return CreateResult("echo-1", {k: v for k, v in props.items() if k != "__provider"})

    def diff(self, id_, olds, news):
        return DiffResult(changes=olds.get("name") != news.get("name"), replaces=[])


def test_secret_inputs_come_back_marked_secret_and_errors_surface():
    with DynamicHost() as host:
        assert host.accepts_secrets is False  # so the engine (and this client) sends secrets as plain values
        made = host.create(EchoProvider(), {"name": "a", "password": "p4ss"}, secret_keys=("password",))
        assert made.id == "echo-1" and made.outs == {"name": "a", "password": "p4ss"}
        assert made.secret_keys == {"password"}
        assert host.diff(EchoProvider(), made.id, made.outs, {"name": "a", "password": "p4ss"}).changes is False
        with pytest.raises(DynamicProviderError, match="asked to fail"):
            host.create(EchoProvider(), {"fail": True})
