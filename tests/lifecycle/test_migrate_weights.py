"""The weight copy of a migration: real stores with different keys, verified, resumable, estimated."""
from __future__ import annotations

import os

import pytest

from infra.lifecycle.secrets import resolver
from infra.errors import StorageError
from infra.lifecycle.weights import StoreWeights
from infra.stack.stackfile import load_stack
from infra.storage.settings import StoreSettings
from infra.storage.sync import push
from tests.support.progharness import write_stack

SSH = {"kind": "ssh", "hosts": [{"address": "10.0.0.2"}], "private_key": {"env": "SSH_KEY"}}
PREFIX = "llama-3.1-8b-instruct"


def make_model(folder, mib: int = 3):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    (folder / "model.safetensors").write_bytes(os.urandom(mib << 20))
    return folder


def server_pair(s3_server_factory, monkeypatch, names=("WA", "WB")):
    """Two real S3 servers with different keys; stack NAME's secrets in NAME_S3_ACCESS, NAME_S3_SECRET, NAME_API_KEY."""
    servers = []
    for i, name in enumerate(names):
        server = s3_server_factory(access_key=f"{name.lower()}-access", secret_key=f"{name.lower()}-secret-key-{i}123")
        monkeypatch.setenv(f"{name}_S3_ACCESS", server.access_key)
        monkeypatch.setenv(f"{name}_S3_SECRET", server.secret_key)
        monkeypatch.setenv(f"{name}_API_KEY", "k")
        servers.append(server)
    return servers


@pytest.fixture
def two_stores(tmp_path, s3_server_factory, monkeypatch):
    a, b = server_pair(s3_server_factory, monkeypatch)
    for server in (a, b):
        (server.root / "inferry-weights").mkdir(parents=True, exist_ok=True)
    sa = load_stack(str(write_stack(tmp_path, "wa", target=SSH, storage_endpoint=a.endpoint, env_prefix="WA",
                                    provider={"egress_per_gb": 0.09})))
    sb = load_stack(str(write_stack(tmp_path, "wb", target=SSH, storage_endpoint=b.endpoint, env_prefix="WB")))
    push(StoreSettings.from_stack(sa, resolver(sa)), make_model(tmp_path / "model"), PREFIX, show=False)
    return sa, sb, b


def test_copy_between_stores_with_different_keys_is_verified_and_resumable(two_stores):
    sa, sb, b = two_stores
    w = StoreWeights()
    assert w.size(sa) == (3 << 20) + len('{"architectures": ["LlamaForCausalLM"]}')
    with pytest.raises(StorageError):
        w.size(sb)  # nothing there yet
    lines = []
    t = w.copy(sa, sb, lines.append)
    assert t.bytes_copied == t.bytes_total == w.size(sa) and "2 file(s) transferred" in lines[0]
    w.verify(sb)
    again = w.copy(sa, sb, lines.append)
    assert again.bytes_copied == 0 and again.bytes_total == t.bytes_total


def test_corrupted_copy_fails_verification(two_stores):
    sa, sb, b = two_stores
    w = StoreWeights()
    w.copy(sa, sb, print)
    target = b.root / "inferry-weights" / PREFIX / "model.safetensors"
    data = bytearray(target.read_bytes())
    data[100] ^= 0xFF
    target.write_bytes(bytes(data))
    with pytest.raises(StorageError) as e:
        w.verify(sb)
    assert "model.safetensors" in e.value.render() and "run the migration again" in e.value.render()


@pytest.fixture
def two_buckets(tmp_path, s3_server_factory, monkeypatch):
    """Two stacks whose stores use different bucket names (global names: AWS has one, the EU cloud another)."""
    a, b = server_pair(s3_server_factory, monkeypatch)
    (a.root / "weights-aws-prod").mkdir(parents=True)  # B's bucket does not exist yet: the copy creates it
    model = make_model(tmp_path / "model")
    return a, b, model


def _stacks(tmp_path, a, b, a_weights=None):
    model = {"name": "llama-3.1-8b-instruct", "weights": a_weights or PREFIX}
    sa = load_stack(str(write_stack(tmp_path, "wa", target=SSH, storage_endpoint=a.endpoint, env_prefix="WA",
                                    bucket="weights-aws-prod", model=model)))
    sb = load_stack(str(write_stack(tmp_path, "wb", target=SSH, storage_endpoint=b.endpoint, env_prefix="WB",
                                    bucket="weights-eu-prod", model={**model, "weights": PREFIX})))
    return sa, sb


@pytest.mark.parametrize("a_weights", [None, f"s3://weights-aws-prod/{PREFIX}"], ids=["prefix", "old-form"])
def test_migrate_copies_into_the_target_stacks_own_bucket(tmp_path, two_buckets, a_weights):
    from infra.lifecycle.migrate import Migration

    a, b, model = two_buckets
    sa, sb = _stacks(tmp_path, a, b, a_weights)
    push(StoreSettings.from_stack(sa, resolver(sa)), model, PREFIX, show=False)
    assert sb.deployment.weights_uri == f"s3://weights-eu-prod/{PREFIX}"
    w = StoreWeights()
    plan = Migration(sa, sb, deployer=None, weights=w, root=tmp_path / "state").plan()
    assert not [d for d in plan.diffs if d.section in ("model", "engine")], plan.diffs  # model stays identical
    assert "storage.bucket" in [d.path for d in plan.diffs]
    lines = []
    t = w.copy(sa, sb, lines.append)
    w.verify(sb)
    assert lines[0] == f"created bucket weights-eu-prod at {b.endpoint}"
    assert t.bytes_copied == t.bytes_total > 3 << 20
    stored = b.root / "weights-eu-prod" / PREFIX
    assert (stored / "model.safetensors").read_bytes() == (model / "model.safetensors").read_bytes()
    assert not (b.root / "weights-aws-prod").exists()  # nothing went to a bucket named after A's
