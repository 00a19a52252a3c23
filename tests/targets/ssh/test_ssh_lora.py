"""Two LoRA adapters on docker hosts, for real: pushed to the store like a model, fetched beside it on every host
and verified, served by the engine inferry renders (the stand-in lists them as vLLM's serving code does), each
answering a chat through the gateway; removing one rolls out host by host while a client on a host chats with
the other all along and sees only 200s (a chat the restarting host's port proxy drops is sent again to the other
host by the gateway: tests/gateway/test_gateway_retry.py)."""
from __future__ import annotations

import json
import threading

import pytest

from infra.lifecycle import probe
from infra.stack.config import Adapter
from infra.storage.settings import StoreSettings
from infra.storage.sync import push
from tests.support import ssh_direct as ssh_apply
from tests.support.ssh_env import BUCKET, MODEL, API_KEY, fresh_sessions, plan_for, secrets, weights_store  # noqa: F401
from tests.targets.ssh.test_ssh_docker import Pair, container

pytestmark = [pytest.mark.docker, pytest.mark.lora]
ADAPTERS = [Adapter(name="sql", weights="adapters/sql-lora", rank=16), Adapter(name="chat", weights="adapters/chat",
                                                                               rank=8)]


class LoraPair(Pair):
    """The docker pair serving its model with these adapters."""

    adapters = ADAPTERS

    def deployment(self, engine=None, **target):
        d = super().deployment(engine, **target)
        return d.model_copy(update={"model": d.model.model_copy(update={"adapters": list(self.adapters)})})


@pytest.fixture(scope="module")
def lora(host_network, weights_store, tmp_path_factory):
    settings = StoreSettings(weights_store.endpoint, weights_store.region, BUCKET, weights_store.access_key,
                             weights_store.secret_key)
    for a in ADAPTERS:
        folder = tmp_path_factory.mktemp(a.name)
        (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": a.rank,
                                                                "base_model_name_or_path": MODEL}))
        (folder / "adapter_model.safetensors").write_bytes(a.name.encode() * 4096)
        push(settings, folder, a.weights, show=False)
    p = LoraPair(host_network.add_hosts(["lr1", "lr2"], docker=True), weights_store)
    for h in p.hosts:
        h.set_standin(startup_s=0.5)
    p.first = p.apply()
    yield p
    ssh_apply.destroy(plan_for(p.deployment()), secrets(p.hosts, weights_store))
    for h in p.hosts:
        host_network.remove_host(h)


def models(p) -> list[tuple[str, str | None]]:
    """(id, parent) of every model /v1/models lists through the gateway."""
    status, body = probe.get(p.first.endpoint + "/models", 5, API_KEY)
    assert status == 200, body
    return [(m["id"], m.get("parent")) for m in json.loads(body)["data"]]


def chat(p, model: str, host=None) -> str:
    """The status of one chat naming MODEL through the gateway, sent from a host (the client's side)."""
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
    h = host or p.hosts[1]
    r = h.exec(f"curl -s -o /dev/null -m 10 -w '%{{http_code}}' -H 'Authorization: Bearer {API_KEY}' "
               f"-H 'Content-Type: application/json' -d '{body}' {p.first.endpoint}/chat/completions")
    return r.stdout


def test_both_adapters_are_fetched_verified_and_served_on_every_host(lora):
    assert models(lora) == [(MODEL, None), ("sql", MODEL), ("chat", MODEL)]
    for h in lora.hosts:
        c = container(h)
        assert "--enable-lora" in c["Args"] and "--max-lora-rank" in c["Args"]
        for a in ADAPTERS:  # the engine's folder for each adapter, as the host has it: the pushed bytes
            src = next(m["Source"] for m in c["Mounts"] if m["Source"].startswith("/var/lib/inferry/weights"))
            got = h.exec(f"cat {src}/{a.weights}/adapter_model.safetensors", check=True).stdout
            assert got == a.name * 4096
    assert {chat(lora, m) for m in (MODEL, "sql", "chat")} == {"200"}
    assert chat(lora, "nope") == "404"
    from infra.lifecycle.status import endpoint_status

    assert endpoint_status(lora.first.endpoint, api_key=API_KEY).adapters == ("sql", "chat")  # `inferry status`


def test_removing_an_adapter_rolls_out_host_by_host_while_the_other_is_served(lora):
    starts = [len(h.engine_starts()) for h in lora.hosts]
    codes: list[str] = []
    stop = threading.Event()

    def client():
        while not stop.is_set():
            codes.append(chat(lora, "sql", lora.hosts[1]))

    t = threading.Thread(target=client)
    t.start()
    try:
        lora.adapters = ADAPTERS[:1]
        lora.apply()
    finally:
        stop.set()
        t.join()
    assert len(codes) > 5 and set(codes) == {"200"}, codes  # served before, during and after the roll
    assert models(lora) == [(MODEL, None), ("sql", MODEL)]
    assert chat(lora, "chat") == "404"
    assert [len(h.engine_starts()) for h in lora.hosts] == [n + 1 for n in starts]  # each host restarted once
    first, second = (container(h)["State"]["StartedAt"] for h in lora.hosts)
    assert second > first  # one host at a time
