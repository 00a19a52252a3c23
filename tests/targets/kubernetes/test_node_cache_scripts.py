"""The node cache's init-container scripts run for real (weights_delivery: node-cache): the aws CLI against a real
S3 server behind a byte-counting proxy, then the check, as the fetch and verify containers of successive pods on
one node run them. What crossed the wire is counted by the proxy, not by the scripts."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infra.stack.resources import bundled
from infra.targets.kubernetes.weights import FETCH_SCRIPT, VERIFY_SCRIPT
from tests.support.pods import push
from tests.support.servers.proxy import CountingProxy
from tests.support.servers.s3 import client_path
from tests.support.storage_util import make_model

TEMPLATES = bundled("templates") / "kubernetes"
MiB = 1 << 20
BUCKET = "inferry-weights"  # the bucket tests.support.pods.push writes


@pytest.fixture(params=["s5cmd-busybox", "s5cmd", "aws"])
def tool(request) -> str:
    """The fetch image's client: s5cmd with BusyBox's shell and tools (the default image's), s5cmd with the system's,
    or the aws CLI; each test runs with each."""
    return request.param


@pytest.fixture
def store(s3_server_factory, tmp_path, monkeypatch):
    """A real S3 server holding two models pushed by `inferry weights push` (a and b, 3 MiB of shards each),
    reached through a counting proxy."""
    server = s3_server_factory()
    server.bucket(BUCKET)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", server.secret_key)
    for name, seed in (("a", 1), ("b", 2)):
        make_model(tmp_path / "src" / name, shards=(2 * MiB, 1 * MiB), seed=seed)
        push(server, tmp_path / "src" / name, name)
    with CountingProxy(server.endpoint) as proxy:
        yield server, proxy


class Node:
    """One node's cache folder, and pods that start on it (each a fresh links folder and a name of its own)."""

    def __init__(self, root: Path, server, proxy, tool: str, cache_bytes: int = 64 * MiB):
        self.root, self.server, self.proxy, self.cache_bytes = root, server, proxy, cache_bytes
        self.path = client_path(root / "bin", tool)
        self.cache = root / "cache"
        self.cache.mkdir(parents=True, exist_ok=True)
        self.pods = 0

    def env(self, prefix: str, models: Path) -> dict[str, str]:
        s = self.server
        return {"PATH": self.path, "HOME": str(self.root / "home"),
                "BUCKET": BUCKET, "PREFIX": prefix, "WEIGHTS_DIR": str(models / "m"),
                "AWS_ENDPOINT_URL": self.proxy.endpoint, "AWS_DEFAULT_REGION": s.region,
                "AWS_ACCESS_KEY_ID": s.access_key, "AWS_SECRET_ACCESS_KEY": s.secret_key,
                "ADDRESSING_STYLE": "path", "MANIFEST": "inferry-manifest.json",
                "CACHE_DIR": str(self.cache), "CACHE_BYTES": str(self.cache_bytes)}

    def start_pod(self, prefix: str = "a") -> tuple[Path, str]:
        """Fetch then verify, as a new pod's init containers; returns (its model folder, both outputs)."""
        self.pods += 1
        models = self.root / f"pod-{self.pods}"
        models.mkdir()
        (self.root / "home").mkdir(exist_ok=True)
        out = ""
        for cmd in (["sh", str(TEMPLATES / FETCH_SCRIPT)], [sys.executable, str(TEMPLATES / VERIFY_SCRIPT)]):
            r = subprocess.run(cmd, env=self.env(prefix, models), capture_output=True, text=True, timeout=120,
                               check=False, cwd=self.root)
            out += r.stdout + r.stderr
            assert r.returncode == 0, out
        return models / "m", out


def _same_files(folder: Path, source: Path) -> bool:
    want = {p.relative_to(source): p.read_bytes() for p in source.rglob("*") if p.is_file()}
    return all((folder / rel).read_bytes() == data for rel, data in want.items())


def test_a_second_pod_on_the_node_fetches_nothing_and_reads_the_same_files(store, tmp_path, tool):
    server, proxy = store
    node = Node(tmp_path / "node", server, proxy, tool)
    first, out = node.start_pod()
    assert re.search(r"^weights: fetched s3://\S+ for manifest [0-9a-f]{64} into the node cache in \d+\.\d\d s$",
                     out, re.M) and proxy.down > 3 * MiB, out
    assert first.is_symlink() and _same_files(first, tmp_path / "src" / "a")
    proxy.reset()
    second, out = node.start_pod()
    assert "nothing to fetch" in out and "unchanged since it was verified" in out
    assert proxy.down < 64 * 1024  # the manifest only
    assert second.resolve() == first.resolve() and _same_files(second, tmp_path / "src" / "a")
    assert not list((node.cache / ".incoming").iterdir())  # nothing staged is left behind


def test_a_copy_changed_on_the_node_is_fetched_again_not_used(store, tmp_path, tool):
    server, proxy = store
    node = Node(tmp_path / "node", server, proxy, tool)
    folder, _ = node.start_pod()
    shard = next(p for p in folder.resolve().rglob("*.safetensors"))
    time.sleep(1.1)  # the record holds times to the second
    data = bytearray(shard.read_bytes())
    data[100] ^= 0xFF
    shard.write_bytes(bytes(data))
    proxy.reset()
    again, out = node.start_pod()
    assert "fetched" in out and proxy.down > 2 * MiB
    assert _same_files(again, tmp_path / "src" / "a")


def test_the_cache_keeps_under_its_bound_dropping_the_least_recently_used(store, tmp_path, tool):
    server, proxy = store
    node = Node(tmp_path / "node", server, proxy, tool, cache_bytes=5 * MiB)  # room for one model of 3 MiB, not two
    a, _ = node.start_pod("a")
    kept_a = a.resolve()
    for odd in ("a b", "b", "notes"):  # not a kept model's name: never removed, nor what a split name would be
        (node.cache / odd).mkdir()
        (node.cache / odd / ".verified").write_text("x")
        os.utime(node.cache / odd / ".verified", (time.time() - 3600,) * 2)  # used least recently: seen first
    (node.root / "b").mkdir()
    b, out = node.start_pod("b")
    assert "removing" in out and not kept_a.exists()
    assert _same_files(b, tmp_path / "src" / "b")
    assert all((node.cache / odd / ".verified").exists() for odd in ("a b", "b", "notes")) and (node.root / "b").is_dir()
    total = sum(p.stat().st_size for p in node.cache.rglob("*") if p.is_file())
    assert total <= 5 * MiB


def test_a_manifest_with_a_path_out_of_the_folder_keeps_nothing(store, tmp_path, tool):
    server, proxy = store
    manifest = server.root / BUCKET / "a" / "inferry-manifest.json"
    doc = json.loads(manifest.read_text())
    doc["files"][0]["path"] = "../../escape"
    manifest.write_text(json.dumps(doc))
    node = Node(tmp_path / "node", server, proxy, tool)
    models = node.root / "pod"
    models.mkdir()
    (node.root / "home").mkdir()
    env = node.env("a", models)
    assert subprocess.run(["sh", str(TEMPLATES / FETCH_SCRIPT)], env=env, capture_output=True, check=False,
                          timeout=120).returncode == 0
    r = subprocess.run([sys.executable, str(TEMPLATES / VERIFY_SCRIPT)], env=env, capture_output=True, text=True,
                       check=False, timeout=120)
    assert r.returncode == 1 and "'../../escape': refused: the path leaves the model folder" in r.stderr
    assert not [p for p in node.cache.iterdir() if p.name != ".incoming"]  # nothing kept for the next pod
    assert not (node.root / "escape").exists() and not os.path.lexists(node.root / "node" / "escape")


def test_files_in_the_store_beside_the_manifest_are_not_kept_or_read(store, tmp_path, tool):
    """Whoever can write the bucket plants files the manifest does not list: the node keeps the manifest's files only
    (its record covers nothing else), so no later pod on the node reads them."""
    server, proxy = store
    s3 = server.boto3_client()
    s3.put_object(Bucket=BUCKET, Key="a/modeling_evil.py", Body=b"import os\n")
    s3.put_object(Bucket=BUCKET, Key="a/extra/tokenizer.json", Body=b"{}")
    node = Node(tmp_path / "node", server, proxy, tool)
    folder, out = node.start_pod()
    kept = folder.resolve()
    assert "removing 'modeling_evil.py': in the store but not in inferry-manifest.json" in out
    listed = {e["path"] for e in json.loads((kept / "inferry-manifest.json").read_text())["files"]}
    on_disk = {str(p.relative_to(kept)) for p in kept.rglob("*") if p.is_file() and not p.name.startswith(".")}
    assert on_disk == listed | {"inferry-manifest.json"}
    assert not (kept / "extra").exists() and _same_files(folder, tmp_path / "src" / "a")


def test_what_a_pod_gone_mid_fetch_left_is_removed_and_a_live_fetch_is_not(store, tmp_path, tool):
    # A pod deleted mid-fetch (scaled away during its cold start) leaves its staging folder and manifest; the
    # next pod that fetches removes them once nothing was written in them for 30 minutes, not one still written.
    server, proxy = store
    node = Node(tmp_path / "node", server, proxy, tool)
    incoming = node.cache / ".incoming"
    hour_ago = time.time() - 3600
    for name, when in (("gone", hour_ago), ("live", time.time())):
        stage = incoming / f"{'0' * 64}.pod-{name}"
        (stage / "sub").mkdir(parents=True)
        (stage / "sub" / "model-00001.safetensors").write_bytes(b"x" * 1000)
        (incoming / f"pod-{name}.manifest").write_text("{}")
        for path in (stage / "sub" / "model-00001.safetensors", stage / "sub", stage, incoming / f"pod-{name}.manifest"):
            os.utime(path, (when, when))
    folder, out = node.start_pod("a")
    assert _same_files(folder, tmp_path / "src" / "a"), out
    left = sorted(p.name for p in incoming.iterdir())
    assert left == [f"{'0' * 64}.pod-live", "pod-live.manifest"], (left, out)
    assert out.count("left by a fetch that did not finish") == 2, out


# Not under BusyBox: each pod's hostname is a `uname` first on PATH, and Debian's busybox-static shell runs its own
# applets before anything on PATH.
@pytest.mark.parametrize("tool", ["s5cmd", "aws"])
def test_two_pods_fetching_the_same_model_at_once_keep_one_copy_and_leave_nothing_staged(store, tmp_path, tool):
    """Both fetch before either is verified (two replicas starting on one node); the second verify finds the first's
    copy in place, uses it and removes its own staging folder."""
    server, proxy = store
    node = Node(tmp_path / "node", server, proxy, tool)
    pods = []
    for name in ("pod-x", "pod-y"):
        models = node.root / name
        models.mkdir()
        (node.root / "home").mkdir(exist_ok=True)
        env = {**node.env("a", models), "POD": name,
               "PATH": f"{_hostname_stub(tmp_path, name)}:{node.env('a', models)['PATH']}"}
        r = subprocess.run(["sh", str(TEMPLATES / FETCH_SCRIPT)], env=env, capture_output=True, text=True,
                           timeout=120, check=False, cwd=node.root)
        assert r.returncode == 0 and "fetched" in r.stdout, r.stderr
        pods.append((models, env))
    for models, env in pods:
        code = f"import os; os.uname = lambda: type('u', (), {{'nodename': {env['POD']!r}}})(); " \
               f"exec(open({str(TEMPLATES / VERIFY_SCRIPT)!r}).read())"
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                           check=False)
        assert r.returncode == 0, r.stderr
    assert pods[0][0].joinpath("m").resolve() == pods[1][0].joinpath("m").resolve()
    assert not list((node.cache / ".incoming").iterdir())
    assert len([p for p in node.cache.iterdir() if p.name != ".incoming"]) == 1


def _hostname_stub(tmp_path: Path, name: str) -> Path:
    """A folder whose `uname -n` prints `name`: each pod has its own hostname."""
    folder = tmp_path / f"uname-{name}"
    folder.mkdir()
    (folder / "uname").write_text(f"#!/bin/sh\necho {name}\n")
    (folder / "uname").chmod(0o755)
    return folder


def test_a_check_that_outlasts_the_abandoned_rule_keeps_its_staging_folder(store, tmp_path):
    """Pod A's verify hashes for longer than the 30 minutes after which a staging folder counts as abandoned (a large
    model on a slow disk: here its hash is held, and its files aged an hour); pod B's fetch on the node meanwhile
    must leave A's folder, and A's check then finishes and keeps the copy."""
    server, proxy = store
    node = Node(tmp_path / "node", server, proxy, "s5cmd")
    stubs = {name: _hostname_stub(tmp_path, name) for name in ("pod-a", "pod-b")}
    envs = {}
    for name in stubs:
        (node.root / name).mkdir()
        (node.root / "home").mkdir(exist_ok=True)
        env = node.env("a", node.root / name)
        envs[name] = {**env, "PATH": f"{stubs[name]}:{env['PATH']}"}
    fetch = ["sh", str(TEMPLATES / FETCH_SCRIPT)]
    r = subprocess.run(fetch, env=envs["pod-a"], capture_output=True, text=True, timeout=120, cwd=node.root)
    assert r.returncode == 0, r.stderr
    [stage] = [p for p in (node.cache / ".incoming").iterdir() if p.name.endswith(".pod-a")]
    started, go = tmp_path / "hashing", tmp_path / "go"
    script = (TEMPLATES / VERIFY_SCRIPT).read_text()
    assert script.count("ALIVE_EVERY_S = 60") == 1
    held = f"""import hashlib, os, time
real = hashlib.sha256
class Held:  # hashes as sha256, but each block waits for the test's go
    def __init__(self, data=b""): self.h = real(data)
    def hexdigest(self): return self.h.hexdigest()
    def update(self, block):
        open({str(started)!r}, "w").close()
        while not os.path.exists({str(go)!r}): time.sleep(0.05)
        self.h.update(block)
hashlib.sha256 = Held
os.uname = lambda: type("u", (), {{"nodename": "pod-a"}})()
exec({script.replace("ALIVE_EVERY_S = 60", "ALIVE_EVERY_S = 0.1")!r})
"""
    verify_a = subprocess.Popen([sys.executable, "-c", held], env=envs["pod-a"], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 120
        while not started.exists() and verify_a.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        assert started.exists(), verify_a.stdout.read() if verify_a.poll() is not None else "verify never hashed"
        hour_ago = time.time() - 3600
        for path in [*stage.rglob("*"), stage]:
            os.utime(path, (hour_ago, hour_ago), follow_symlinks=False)
        while stage.stat().st_mtime < hour_ago + 60 and verify_a.poll() is None and time.time() < deadline:
            time.sleep(0.05)  # until the check's next touch (every 0.1 s here), however loaded the machine
        r = subprocess.run(fetch, env=envs["pod-b"], capture_output=True, text=True, timeout=120, cwd=node.root)
        assert r.returncode == 0, r.stderr
        assert stage.is_dir() and "did not finish" not in r.stdout, r.stdout
    finally:
        go.touch()
        out, _ = verify_a.communicate(timeout=120)
    assert verify_a.returncode == 0 and "kept on this node" in out, out
    assert _same_files(node.root / "pod-a" / "m", tmp_path / "src" / "a")
