"""`inferry migrate` end-to-end with engines on this machine: real stores, real stand-in engines, no downtime.

The Deployer here runs the stand-in engine (tests/standin) on 127.0.0.1 from weights it pulls out of the
stack's own store, so the copy, the bring-up and the check all have to really work.
"""
from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from infra.errors import InferryError
from infra.lifecycle import probe
from infra.lifecycle.deployer import Changes, OutputValue, Progress
from infra.lifecycle.drain import Drain
from infra.lifecycle.migrate import Migration, MigrationError
from infra.lifecycle.secrets import resolver
from infra.lifecycle.weights import StoreWeights
from infra.lifecycle.secrets import resolve, resolver
from infra.stack.stackfile import Stack, load_stack
from infra.storage.settings import StoreSettings
from infra.storage.sync import pull, push
from tests.support.progharness import Poller, write_stack
from tests.support.standin.process import RunningEngine, free_port, start_engine

PREFIX = "llama-3.1-8b-instruct"
SSH = {"kind": "ssh", "hosts": [{"address": "127.0.0.1"}], "private_key": {"env": "SSH_KEY"}}

QUICK = Drain(grace_s=0.5, timeout_s=30)  # the source is idle in these tests: a short grace


class LocalEngineDeployer:
    """A Deployer that serves a stack with the stand-in engine on localhost, from the stack's own store."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.engines: dict[str, RunningEngine] = {}

    def check(self, stack: Stack) -> None:
        """Engines on localhost need nothing more."""

    def preview(self, stack: Stack, progress: Progress) -> Changes:
        return Changes({"same" if stack.name in self.engines else "create": 1})

    def up(self, stack: Stack, progress: Progress) -> dict[str, OutputValue]:
        running = self.engines.get(stack.name)
        if running is None or running.proc.poll() is not None:
            d = stack.deployment
            folder = self.workdir / stack.name / "model"
            settings = StoreSettings.from_stack(stack, resolver(stack))
            progress(f"  pull {pull(settings, d.model.weights_prefix, folder, show=False).summary}")
            key = resolve(d.serving.api_key, stack.name, "serving.api_key", stack.path)
            args = ["serve", str(folder), "--host", "127.0.0.1", "--port", str(d.serving.port),
                    "--served-model-name", d.model.name]
            try:
                self.engines[stack.name] = start_engine(args, self.workdir / f"{stack.name}.log",
                                                        env={"VLLM_API_KEY": key})
            except RuntimeError as e:
                raise InferryError(f"engine did not start: {str(e)[-300:]}", "see the engine log",
                                   where=stack.name) from None
        return self.outputs(stack)

    def destroy(self, stack: Stack, progress: Progress) -> Changes:
        running = self.engines.pop(stack.name, None)
        if running is not None:
            running.stop()
        return Changes({"delete": 1} if running else {})

    def outputs(self, stack: Stack) -> dict[str, OutputValue]:
        running = self.engines.get(stack.name)
        return {"endpoint": OutputValue(running.base_url)} if running and running.proc.poll() is None else {}

    def close(self) -> None:
        for running in self.engines.values():
            running.stop()


@pytest.fixture
def world(tmp_path, s3_server_factory, monkeypatch):
    """Stacks a (serving) and b (empty store) on two stores with different keys; a is up."""
    servers = {}
    for name, keys in (("a", ("ma-access", "ma-secret-0123456")), ("b", ("mb-access", "mb-secret-7654321"))):
        server = servers[name] = s3_server_factory(*keys)
        (server.root / "inferry-weights").mkdir(parents=True, exist_ok=True)
        prefix = f"M{name.upper()}"
        monkeypatch.setenv(f"{prefix}_S3_ACCESS", keys[0])
        monkeypatch.setenv(f"{prefix}_S3_SECRET", keys[1])
        monkeypatch.setenv(f"{prefix}_API_KEY", f"api-key-of-{name}")
    a = load_stack(str(write_stack(tmp_path, "mig-a", target=SSH, storage_endpoint=servers["a"].endpoint,
                                   env_prefix="MA", port=free_port(), provider={"egress_per_gb": 0.09})))
    b = load_stack(str(write_stack(tmp_path, "mig-b", target=SSH, storage_endpoint=servers["b"].endpoint,
                                   env_prefix="MB", port=free_port())))
    model = tmp_path / "src-model"
    model.mkdir()
    (model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    (model / "model.safetensors").write_bytes(os.urandom(2 << 20))
    push(StoreSettings.from_stack(a, resolver(a)).with_bucket("inferry-weights"), model, PREFIX, show=False)
    deployer = LocalEngineDeployer(tmp_path)
    deployer.up(a, print)
    yield a, b, deployer, servers
    deployer.close()


def test_migrate_with_failures_at_each_step_never_leaves_nothing_serving(world, tmp_path, monkeypatch):
    a, b, deployer, servers = world
    a_url, b_url = (f"http://127.0.0.1:{s.deployment.serving.port}" for s in (a, b))
    poller = Poller([(a_url, "api-key-of-a"), (b_url, "api-key-of-b")])
    poller.start()
    lines: list[str] = []
    client_key = {"mig-b": "api-key-of-b"}  # the key the migration's client uses for B's check
    migration = lambda: Migration(a, b, deployer, StoreWeights(), say=lines.append, drain=QUICK, root=tmp_path,  # noqa: E731
                                  health_timeout_s=5, secret=lambda s: client_key[s.name])

    plan = migration().plan()
    assert plan.estimate.nbytes > 2 << 20 and plan.estimate.egress_cost > 0

    servers["b"].kill()  # 1. B's store is down: the copy fails
    with pytest.raises(MigrationError) as e:
        migration().run(destroy_source=True)
    assert e.value.step == "copy" and f"still serving at {a_url}" in e.value.render()
    assert probe.healthy(a_url)
    servers["b"].restart()

    blocker = socket.socket()  # 2. B's port is taken: bringing up B fails
    blocker.bind(("127.0.0.1", b.deployment.serving.port))
    blocker.listen()
    with pytest.raises(MigrationError) as e:
        migration().run(destroy_source=True)
    assert e.value.step == "up" and probe.healthy(a_url)
    blocker.close()

    client_key["mig-b"] = "a-wrong-key"  # 3. B comes up, but its key is not the one clients have
    with pytest.raises(MigrationError) as e:
        migration().run(destroy_source=True)
    assert e.value.step == "check" and "refused the API key" in e.value.render() and probe.healthy(a_url)
    client_key["mig-b"] = "api-key-of-b"

    lines.clear()
    assert migration().run(destroy_source=True) == [b_url]
    samples = poller.finish()
    text = "\n".join(lines)
    assert "copy and verify the weights into mig-b's store: done earlier" in text  # resumed, not redone
    assert "bring up mig-b: done earlier" in text
    assert f"cutover done: mig-a is destroyed; clients must use {b_url}/v1" in text
    assert not probe.healthy(a_url) and probe.healthy(b_url)
    assert all(any(s) for s in samples), "a moment with no endpoint answering"
    # The client saw A alone, then both, then B alone (a sample's two probes straddle steps, so look for each).
    assert samples[0] == (True, False) and (True, True) in samples and (False, True) in samples


def test_cli_migrate_prints_plan_progress_and_cutover(cli, world, tmp_path, monkeypatch):
    a, b, deployer, _ = world
    monkeypatch.setenv("INFERRY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr("cli.lifecycle.make_deployer", lambda: deployer)
    r = cli("migrate", "--from", str(a.path), "--to", str(b.path), "--yes")
    assert r.exit_code == 0, r.output
    print(r.output)
    b_url = deployer.outputs(b)["endpoint"].value
    for expected in ("migrate mig-a -> mig-b", "  provider.egress_per_gb: 0.09 -> 0.0",
                     "egress ~$0.00 at $0.090/GB", "[1/3] copy and verify the weights into mig-b's store",
                     "[3/3] check mig-b is healthy and answers a chat completion",
                     f"cutover: point clients (OPENAI_BASE_URL) at {b_url}/v1"):
        assert expected in r.output
    assert probe.healthy(deployer.outputs(a)["endpoint"].value)  # without --destroy-source A keeps serving
    r = cli("migrate", "--from", str(a.path), "--to", str(b.path), "--yes", "--destroy-source", "--drain-grace", "0.5")
    assert r.exit_code == 0 and "[4/4] destroy mig-a" in r.output and deployer.outputs(a) == {}
    print(r.output)
