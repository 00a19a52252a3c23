"""Canary secrets through the real flows: apply/destroy on a test host, render, errors, weights CLI, journals.

Every secret gets a unique, greppable value; afterwards everything the flow produced is searched for it:
state and outputs, captured output and logs, the host's whole filesystem (the 0600 env file excepted), the
host's process command lines, and the files inferry keeps locally. The lifecycle runs under the program
harness (tests/support/progharness.py) so that every log line and captured stream of one process can be searched;
the real engine's state is searched in tests/targets/ssh/test_real_engine_ssh.py.
"""
from __future__ import annotations

import json
import os
import subprocess
import threading
import uuid
from pathlib import Path

import pytest
import yaml

from infra.lifecycle.secrets import resolver
from infra.errors import InferryError
from infra.stack.stackfile import load_stack
from infra.storage.settings import StoreSettings
from infra.storage.sync import push
from infra.targets.ssh import pool
from tests.support.harness import SECRET_SIG, unsecret
from tests.support.progharness import ProgramHarness, write_stack

TAG = uuid.uuid4().hex[:10]
CANARY = {"S3_ACCESS": f"CANARYAK{TAG}", "S3_SECRET": f"canary-s3-secret-{TAG}",
          "API_KEY": f"canary-api-key-{TAG}", "HF_TOKEN": f"hf_canary{TAG}"}
PREFIX = "llama-3.1-8b-instruct"
SIGNATURE = "X-Amz-Signature"


def canaries(key_text: str = "") -> dict[str, str]:
    """Name -> needle: the env canaries plus distinctive lines of the SSH private key."""
    body = [ln for ln in key_text.splitlines() if ln and not ln.startswith("-----")]
    return dict(CANARY) | {f"SSH_KEY[{i}]": ln for i, ln in enumerate(body[-3:])}


def hits(blob: str | bytes, needles: dict[str, str]) -> list[str]:
    """Names of the needles found in blob."""
    data = blob.encode() if isinstance(blob, str) else blob
    return [name for name, n in needles.items() if n.encode() in data]


def scan_tree(root: Path, needles: dict[str, str]) -> dict[str, list[str]]:
    """{file: canaries found} for every regular file under root."""
    found = {}
    for folder, _, names in os.walk(root):
        for name in names:
            p = Path(folder) / name
            if p.is_file() and not p.is_symlink() and (h := hits(p.read_bytes(), needles)):
                found[str(p)] = h
    return found


def stack_file(tmp: Path, name: str, host, endpoint: str, prefix: str, **target) -> Path:
    """An SSH stack for one test host; secrets from PREFIX_* env vars, HF token included."""
    t = {"kind": "ssh", "runtime": "process", "health_timeout_s": 20, "private_key": {"env": f"{prefix}_SSH_KEY"},
         "hosts": [{"address": host.address, "name": host.name, "host_key": host.host_key_line}], **target}
    path = write_stack(tmp, name, target=t, storage_endpoint=endpoint, env_prefix=prefix, provider={"gpu": "H200"})
    doc = yaml.safe_load(path.read_text())
    doc["config"]["inferry:deployment"]["model"]["hf_token"] = {"env": f"{prefix}_HF_TOKEN"}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def world(host_network, s3_server_factory, tmp_path_factory):
    """One test host, one S3 server keyed with the canaries holding the model, env vars CAN_* set."""
    tmp = tmp_path_factory.mktemp("canaries")
    server = s3_server_factory(CANARY["S3_ACCESS"], CANARY["S3_SECRET"], host=host_network.gateway)
    (server.root / "inferry-weights").mkdir(parents=True, exist_ok=True)
    host = host_network.add_host("canary")
    env = {f"CAN_{k}": v for k, v in CANARY.items()} | {"CAN_SSH_KEY": host.client_key_text}
    os.environ.update(env)
    model = tmp / "model"
    model.mkdir()
    (model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    (model / "model.safetensors").write_bytes(os.urandom(1 << 20))
    gw = {"host": host.name, "tls": "off", "http_port": 8080}  # the gateway in front: its config is searched too
    path = stack_file(tmp, "ssh-canary", host, server.endpoint, "CAN", gateway=gw)
    s = load_stack(str(path))
    push(StoreSettings.from_stack(s, resolver(s)).with_bucket("inferry-weights"), model, PREFIX, show=False)
    yield host, server, path, tmp
    host_network.remove_host(host)
    for key in env:
        os.environ.pop(key, None)


class PsWatch(threading.Thread):
    """Samples every command line on the host until stopped."""

    def __init__(self, host):
        super().__init__(daemon=True)
        self.host, self.samples, self.stop = host, [], threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.samples.append(self.host.exec("ps -eo args --no-headers").stdout)

    def finish(self) -> str:
        self.stop.set()
        self.join(30)
        return "\n".join(self.samples)


def unmarked_secrets(recorded, needles: dict[str, str]) -> list[str]:
    """Inputs of dynamic resources that carry a canary but are not marked secret."""
    bad = []
    for r in recorded:
        for key, value in r.inputs.items():
            marked = isinstance(value, dict) and value.get(SECRET_SIG) is not None
            # The pickled provider may capture keys (BucketProvider): Pulumi makes `__provider` a secret
            # always (pulumi/dynamic/dynamic.py serialize_as_secret_always), so it must arrive marked.
            plain = json.dumps(unsecret(value), default=str)
            if not marked and (key == "__provider" or hits(plain, needles)):
                bad.append(f"{r.name}.{key}")
    return bad


def test_apply_bench_and_destroy_leave_no_secret_in_plain_text(world, capfd, caplog, cli, monkeypatch):
    host, _, path, tmp = world
    needles = canaries(host.client_key_text)
    curl_log = "/var/log/canary-curl-argv.log"
    host.install("curl", f'printf "%s\\n" "$*" >> {curl_log}; exec /usr/bin/curl "$@"')
    stack, harness = load_stack(str(path)), ProgramHarness(tmp / "state")
    watch = PsWatch(host)
    watch.start()
    try:
        out = harness.up(stack, print)
    finally:
        ps = watch.finish()
    assert out["endpoint"].value.endswith(":8080/v1") and len(watch.samples) > 3
    assert any(host.root.rglob("caddy.json"))
    assert not hits(ps, needles) and SIGNATURE not in ps
    curl_argv = host.path(curl_log).read_text()
    assert "-K -" in curl_argv and "X-Amz" not in curl_argv and not hits(curl_argv, needles)  # weights came by curl

    state = harness.state(stack)
    for name, r in state["resources"].items():
        assert not hits(json.dumps({k: v for k, v in r["outputs"].items() if k != "__provider"}), needles), name
    assert not hits(json.dumps(state["outputs"]), needles)
    assert not unmarked_secrets(harness.last.resources, needles)

    state_dir = tmp / "inferry-state"  # bench writes its JSON and the measured tokens/s here
    monkeypatch.setenv("INFERRY_STATE_DIR", str(state_dir))
    monkeypatch.setattr("cli.lifecycle.make_deployer", lambda: harness)
    r = cli("bench", str(path), "--requests", "3", "--concurrency", "2", "--output-tokens", "4")
    assert r.exit_code == 0 and "completed 3, errors 0" in r.output, r.output
    assert not hits(r.output, needles) and any(state_dir.rglob("*.json"))
    assert scan_tree(state_dir, needles) == {}

    files = scan_tree(host.root, needles)
    # The engine carries no client key behind the gateway: the key is in the gateway's config only; both 0600.
    env_files = [p for p in files if Path(p).name == "inferry.env"]
    assert len(env_files) == 1 and set(hits(Path(env_files[0]).read_bytes(), needles)) == {"HF_TOKEN"}
    gateway = [p for p in files if Path(p).name == "caddy.json"]
    assert len(gateway) == 1 and set(hits(Path(gateway[0]).read_bytes(), needles)) == {"API_KEY"}
    assert all(Path(p).stat().st_mode & 0o777 == 0o600 for p in env_files + gateway)
    assert Path(gateway[0]).parent.stat().st_mode & 0o777 == 0o700
    assert {p: h for p, h in files.items() if p not in env_files + gateway} == {}

    harness.destroy(stack, print)
    assert not host.path("/etc/inferry/inferry.env").exists()
    assert scan_tree(host.root, needles) == {}
    captured = capfd.readouterr()
    assert not hits(captured.out + captured.err + caplog.text, needles)


def test_render_prints_no_secret(world, cli, tmp_path):
    host, server, path, tmp = world
    needles = canaries(host.client_key_text)
    aws = yaml.safe_load((Path(__file__).parents[2] / "stacks" / "Pulumi.aws-k8s.yaml").read_text())
    k8s = write_stack(tmp_path, "k8s-canary", target=aws["config"]["inferry:deployment"]["target"],
                      storage_endpoint=server.endpoint, env_prefix="CAN")
    for stack in (path, k8s):
        out = tmp_path / f"out-{stack.name}"
        for args in (["--out", str(out)], ["--json"]):
            r = cli("render", str(stack), *args)
            assert r.exit_code == 0, r.output
            assert not hits(r.output, needles), (stack.name, args)
        assert any(out.iterdir()) and scan_tree(out, needles) == {}


def test_weights_cli_and_local_journal_hold_no_secret(world, cli, tmp_path, monkeypatch, capfd):
    host, _, path, tmp = world
    needles = canaries(host.client_key_text)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # sha256 cache and the resume journal
    stack = ["--stack", str(path)]
    runs = [cli("weights", "push", str(tmp / "model"), "--prefix", "canary-copy", *stack),
            cli("weights", "pull", str(tmp_path / "pulled"), *stack),
            cli("weights", "copy", "--to-prefix", "canary-copy2", *stack),
            cli("weights", "verify", *stack), cli("weights", "ls", *stack)]
    for r in runs:
        assert r.exit_code == 0, r.output
        assert not hits(r.output, needles) and SIGNATURE not in r.output, r.output
    assert "canary-copy2" in runs[-1].output and any((tmp_path / "cache" / "inferry" / "journal").iterdir())
    assert scan_tree(tmp_path / "cache", needles) == {}
    monkeypatch.setenv("CAN_S3_SECRET", "wrong-" + CANARY["S3_SECRET"])
    r = cli("weights", "ls", *stack)
    assert r.exit_code == 1 and "rejected the credentials" in r.output and not hits(r.output, needles), r.output
    captured = capfd.readouterr()
    assert not hits(captured.out + captured.err, needles)


def test_migrate_journal_holds_no_secret(world, host_network, s3_server_factory, tmp_path, capfd):
    from infra.lifecycle.drain import Drain
    from infra.lifecycle.migrate import Migration, MigrationError
    from infra.lifecycle.weights import StoreWeights

    host, _, path, tmp = world
    needles = canaries(host.client_key_text)
    server = s3_server_factory(CANARY["S3_ACCESS"], CANARY["S3_SECRET"], host=host_network.gateway)
    (server.root / "inferry-weights").mkdir(parents=True, exist_ok=True)
    host_b = host_network.add_host("canaryb")
    try:
        a = load_stack(str(path))
        b = load_stack(str(stack_file(tmp_path, "ssh-canary-b", host_b, server.endpoint, "CAN")))
        harness, state, lines = ProgramHarness(tmp_path / "state"), tmp_path / "inferry", []
        harness.up(a, print)
        key = {b.name: "sk-not-the-engines-key"}  # the check step fails: the journal stays behind
        migration = lambda: Migration(a, b, harness, StoreWeights(), say=lines.append, drain=Drain(0.5, 30), root=state,  # noqa: E731
                                      health_timeout_s=20, secret=lambda s: key[s.name])
        with pytest.raises(MigrationError) as e:
            migration().run(destroy_source=True)
        assert e.value.step == "check" and any(state.rglob("migrations/*--*.json"))
        assert scan_tree(state, needles) == {} and not hits(e.value.render(), needles)
        key[b.name] = CANARY["API_KEY"]
        migration().run(destroy_source=True)
        assert scan_tree(state, needles) == {} and not hits("\n".join(lines), needles)
        harness.destroy(b, print)
        assert scan_tree(host_b.root, needles) == {}
    finally:
        host_network.remove_host(host_b)
    captured = capfd.readouterr()
    assert not hits(captured.out + captured.err, needles)


def failing_up(tmp: Path, name: str, host, endpoint: str, env: dict[str, str], **target) -> str:
    """Apply a stack whose secrets come from env (prefix BAD) and must fail; its error text, then destroy."""
    os.environ.update({f"BAD_{k}": v for k, v in env.items()})
    path = stack_file(tmp, name, host, endpoint, "BAD", **target)
    stack, harness = load_stack(str(path)), ProgramHarness(tmp / f"state-{name}")
    try:
        with pytest.raises(InferryError) as e:
            harness.up(stack, print)
        return f"{e.value.render()}\n{e.value!s}\n{e.value!r}"
    finally:
        os.environ.update({f"BAD_{k}": v for k, v in CANARY.items()} | {"BAD_SSH_KEY": host.client_key_text})
        harness.destroy(stack, print)


def test_error_messages_carry_no_secret(world, tmp_path, capfd):
    host, server, _, _ = world
    other = tmp_path / "other_key"  # a valid key the host does not authorise
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    bad = {"S3_ACCESS": f"CANARYBADAK{TAG}", "S3_SECRET": f"canary-bad-secret-{TAG}"}
    broken_key = f"-----BEGIN OPENSSH PRIVATE KEY-----\nCANARYKEYBODY{TAG}\n-----END OPENSSH PRIVATE KEY-----\n"
    needles = canaries(host.client_key_text) | bad | {"BROKEN_KEY": f"CANARYKEYBODY{TAG}"}
    needles |= {f"OTHER[{k}]": v for k, v in canaries(other.read_text()).items() if k.startswith("SSH")}
    base = dict(CANARY, SSH_KEY=host.client_key_text)
    texts = {
        "wrong S3 keys": failing_up(tmp_path, "e-s3", host, server.endpoint, base | bad),
        "unparsable SSH key": failing_up(tmp_path, "e-key", host, server.endpoint, base | {"SSH_KEY": broken_key}),
        "unauthorised SSH key": failing_up(tmp_path, "e-auth", host, server.endpoint,
                                           base | {"SSH_KEY": other.read_text()}),
    }
    pool.close_all()  # pooled connections outlive the listener, as on a real host
    host.stop_sshd()
    try:
        texts["host down"] = failing_up(tmp_path, "e-down", host, server.endpoint, base)
    finally:
        host.start_sshd()
    host.set_standin(never_healthy=True)  # last: the knob stays for every engine started after it
    try:
        texts["failed health check"] = failing_up(tmp_path, "e-health", host, server.endpoint, base,
                                                  health_timeout_s=5)
    finally:
        host.set_standin()
    assert "rejected the credentials" in texts["wrong S3 keys"]
    assert "could not be read" in texts["unparsable SSH key"]
    assert "refused key authentication" in texts["unauthorised SSH key"]
    assert "connect" in texts["host down"] and "healthy" not in texts["host down"]
    assert "did not become healthy" in texts["failed health check"]
    for what, text in texts.items():
        assert not hits(text, needles) and SIGNATURE not in text, (what, text)
    captured = capfd.readouterr()
    assert not hits(captured.out + captured.err, needles)


def test_kubernetes_program_keeps_secrets_secret(world, tmp_path):
    import hashlib

    from tests.support.harness import run_main

    _, server, _, _ = world
    aws = yaml.safe_load((Path(__file__).parents[2] / "stacks" / "Pulumi.aws-k8s.yaml").read_text())
    path = write_stack(tmp_path, "k8s-canary", target=aws["config"]["inferry:deployment"]["target"],
                       storage_endpoint=server.endpoint, env_prefix="CAN")
    mocks, exports = run_main(path)
    needles = canaries() | {f"sha256({k})": hashlib.sha256(v.encode()).hexdigest() for k, v in CANARY.items()}
    secrets = [r for r in mocks.resources if r.type == "kubernetes:core/v1:Secret"]
    assert secrets and hits(json.dumps(unsecret(secrets[0].inputs)), needles)  # the values do reach the Secret
    assert not unmarked_secrets(mocks.resources, needles)
    assert not hits(json.dumps(exports, default=str), needles)
