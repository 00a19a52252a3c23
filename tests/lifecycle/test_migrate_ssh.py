"""The whole SSH path under the program harness, then `migrate` between two SSH stacks with no downtime.

Real OpenSSH test hosts (tests/hosts) run the stand-in engine; two real S3 servers with different keys hold
each stack's weights; the Pulumi program (__main__.py) runs under mocks whose dynamic resources are
handed to their real providers (tests/support/progharness.py): a failure is injected at each step of a
migration, which the real engine could not be stopped at (tests/lifecycle/test_real_engine_migrate.py
migrates through it).
"""
from __future__ import annotations

import os
import time

import pytest

from infra.lifecycle.secrets import resolver
from infra.lifecycle import probe
from infra.lifecycle.drain import Drain, busy
from infra.lifecycle.migrate import Migration, MigrationError
from infra.lifecycle.weights import StoreWeights
from infra.stack.stackfile import load_stack
from infra.storage.settings import StoreSettings
from infra.storage.sync import push
from tests.support.progharness import Poller, ProgramHarness, write_stack

PREFIX = "llama-3.1-8b-instruct"
KEYS = {"a": ("sa-access", "sa-secret-0123456789"), "b": ("sb-access", "sb-secret-9876543210")}

QUICK = Drain(grace_s=0.5, timeout_s=30)  # the source is idle in these tests: a short grace


def ops_log(host) -> list[str]:
    return host.exec("cat /etc/inferry/ops.log 2>/dev/null").stdout.splitlines()


@pytest.fixture(scope="module")
def world(host_network, s3_server_factory, tmp_path_factory):
    """Stacks a and b on their own test host and store; a's store holds the model."""
    tmp = tmp_path_factory.mktemp("migrate-ssh")
    env, stacks, servers, hosts = {}, {}, {}, {}
    model = tmp / "model"
    model.mkdir()
    (model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    (model / "model.safetensors").write_bytes(os.urandom(3 << 20))
    for name in ("a", "b"):
        servers[name] = s3_server_factory(*KEYS[name], host=host_network.gateway)
        (servers[name].root / "inferry-weights").mkdir(parents=True, exist_ok=True)
        host = hosts[name] = host_network.add_host(f"mig{name}")
        p = f"S{name.upper()}"
        env.update({f"{p}_S3_ACCESS": KEYS[name][0], f"{p}_S3_SECRET": KEYS[name][1],
                    f"{p}_API_KEY": f"sk-{name}-" + "7" * 20, f"{p}_SSH_KEY": host.client_key_text})
        target = {"kind": "ssh", "runtime": "process", "health_timeout_s": 20, "private_key": {"env": f"{p}_SSH_KEY"},
                  "hosts": [{"address": host.address, "name": host.name, "host_key": host.host_key_line}]}
        stacks[name] = write_stack(tmp, f"ssh-{name}", target=target, storage_endpoint=servers[name].endpoint,
                                   env_prefix=p, provider={"gpu": "H200", "egress_per_gb": 0.05})
    os.environ.update(env)
    a, b = (load_stack(str(stacks[n])) for n in ("a", "b"))
    push(StoreSettings.from_stack(a, resolver(a)).with_bucket("inferry-weights"), model, PREFIX, show=False)
    yield a, b, hosts, servers, ProgramHarness(tmp / "state"), tmp
    for host in hosts.values():
        host_network.remove_host(host)
    for key in env:
        os.environ.pop(key, None)


def test_program_provisions_a_host_and_the_second_run_changes_nothing(world):
    a, _, hosts, _, harness, _ = world
    out = harness.up(a, print)
    assert harness.last.ops.get("create", 0) >= 4 and set(harness.last.ops) <= {"create"}
    endpoint = out["endpoint"].value
    assert probe.base_url(endpoint) == f"http://{hosts['a'].address}:8000"
    assert probe.chat_check(endpoint, os.environ["SA_API_KEY"], a.deployment.model.name)
    before = ops_log(hosts["a"])
    harness.up(a, print)
    assert set(harness.last.ops) == {"same"}
    assert ops_log(hosts["a"]) == before  # nothing written, nothing restarted


def test_migrate_between_ssh_stacks_without_downtime(world):
    a, b, hosts, servers, harness, tmp = world
    harness.up(a, print)
    a_url, b_url = f"http://{hosts['a'].address}:8000", f"http://{hosts['b'].address}:8000"
    poller = Poller([(a_url, os.environ["SA_API_KEY"]), (b_url, os.environ["SB_API_KEY"])])
    poller.start()
    client_key = {b.name: os.environ["SB_API_KEY"]}
    lines: list[str] = []
    migration = lambda: Migration(a, b, harness, StoreWeights(), say=lines.append, drain=QUICK, root=tmp,  # noqa: E731
                                  health_timeout_s=20, secret=lambda s: client_key[s.name])

    servers["b"].kill()  # the target's store is down
    with pytest.raises(MigrationError) as e:
        migration().run(destroy_source=True)
    assert e.value.step == "copy" and probe.healthy(a_url)
    servers["b"].restart()

    hosts["b"].stop_sshd()  # the target's host is unreachable
    with pytest.raises(MigrationError) as e:
        migration().run(destroy_source=True)
    assert e.value.step == "up" and f"still serving at {a_url}/v1" in e.value.render() and probe.healthy(a_url)
    hosts["b"].start_sshd()

    client_key[b.name] = "sk-not-the-engines-key"  # the target answers, but not to the clients' key
    with pytest.raises(MigrationError) as e:
        migration().run(destroy_source=True)
    assert e.value.step == "check" and probe.healthy(a_url), e.value.render()
    client_key[b.name] = os.environ["SB_API_KEY"]

    lines.clear()
    assert migration().run(destroy_source=True) == [f"{b_url}/v1"]
    samples = poller.finish()
    text = "\n".join(lines)
    assert "done earlier" in text and f"cutover done: ssh-a is destroyed; clients must use {b_url}/v1\n" in text + "\n"
    assert not probe.healthy(a_url) and probe.healthy(b_url) and harness.state(a)["resources"] == {}
    assert all(any(s) for s in samples), "a moment with no endpoint answering"
    assert samples[0] == (True, False) and (True, True) in samples and (False, True) in samples
    harness.destroy(b, print)


def test_destroy_source_waits_until_the_source_has_drained(world):
    import threading

    import openai

    a, b, hosts, _, harness, tmp = world
    hosts["a"].set_standin(token_s=0.05)  # 200 tokens: a request runs for about 10 s
    harness.up(a, print)
    a_url = f"http://{hosts['a'].address}:8000"
    client = openai.OpenAI(base_url=a_url + "/v1", api_key=os.environ["SA_API_KEY"], max_retries=0, timeout=60)
    done: dict = {}

    def long_request() -> None:
        stream = client.chat.completions.create(model=a.deployment.model.name, max_tokens=200, stream=True,
                                                messages=[{"role": "user", "content": "count " * 300}])
        done["finish"] = [c.choices[0].finish_reason for c in stream if c.choices][-1]
        done["at"] = time.monotonic()

    lines: list[str] = []

    def say(line: str) -> None:
        lines.append(line)
        if line.strip().startswith("draining ssh-a") and "thread" not in done:
            done["thread"] = threading.Thread(target=long_request)
            done["thread"].start()  # a client is mid-request when the drain begins
            deadline = time.monotonic() + 10
            while busy(a_url) != 1:
                assert time.monotonic() < deadline
                time.sleep(0.05)

    Migration(a, b, harness, StoreWeights(), say=say, drain=Drain(grace_s=0.5, timeout_s=60), root=tmp,
              health_timeout_s=20, secret=lambda s: os.environ[f"S{s.name[-1].upper()}_API_KEY"]).run(destroy_source=True)
    destroyed = time.monotonic()
    done["thread"].join(30)
    assert done["finish"] == "length" and done["at"] < destroyed  # the request was answered whole, before A went
    text = "\n".join(lines)
    assert "      ssh-a: 1 request(s) running or waiting" in text and "ssh-a idle for 0.5s" in text, text
    harness.destroy(b, print)
