"""Faults against real servers: killed mid-push, corrupt object, wrong keys, missing bucket, store down."""
from __future__ import annotations

import socket

import pytest

from infra.errors import StorageError
from infra.storage import sync
from infra.storage.manifest import MANIFEST_NAME
from infra.storage.progress import Meter
from infra.storage.sync import copy, pull, push
from infra.storage.verify import ls, verify
from tests.support.storage_util import flip_byte, hash_cache_in_tmp, make_model, settings  # noqa: F401 - fixture


def _kill_after(monkeypatch, server, nbytes: int) -> None:
    """Kill the server (SIGKILL) once the transfer has moved nbytes."""

    class KillingMeter(Meter):
        def __call__(self, n: int) -> None:
            super().__call__(n)
            if self.done >= nbytes and server.running:
                server.kill()

    monkeypatch.setattr(sync, "Meter", KillingMeter)


def test_server_killed_mid_push_then_rerun_completes_and_verifies(s3_server_factory, tmp_path, monkeypatch):
    server = s3_server_factory()
    server.bucket("fault-push")
    st = settings(server, "fault-push", concurrency=2)
    make_model(tmp_path / "m", shards=(6 << 20, 6 << 20, 12 << 20, 12 << 20))
    _kill_after(monkeypatch, server, 14 << 20)
    with pytest.raises(StorageError) as e:
        push(st, tmp_path / "m", "llama")
    assert "not reachable" in str(e.value) or "run the same command again" in str(e.value)
    monkeypatch.setattr(sync, "Meter", Meter)
    server.restart()
    assert not (server.root / "fault-push" / "llama" / MANIFEST_NAME).exists()  # never taken as complete
    with pytest.raises(StorageError, match="did not finish"):
        pull(st, "llama", tmp_path / "early")
    again = push(st, tmp_path / "m", "llama")
    assert again.skipped, "files completed before the kill are not sent again"
    assert again.bytes_moved < again.manifest.total
    assert verify(st, "llama").ok


def test_server_killed_mid_pull_then_rerun_resumes_and_completes(s3_server_factory, tmp_path, monkeypatch):
    server = s3_server_factory()
    server.bucket("fault-pull")
    st = settings(server, "fault-pull", concurrency=2)
    make_model(tmp_path / "m", shards=(12 << 20, 12 << 20))
    push(st, tmp_path / "m", "m")
    _kill_after(monkeypatch, server, 8 << 20)
    with pytest.raises(StorageError):
        pull(st, "m", tmp_path / "out")
    assert list((tmp_path / "out").rglob("*.inferry-part")), "the parts written before the kill are kept"
    assert not (tmp_path / "out" / "model-00001-of-00002.safetensors").exists()  # never renamed unchecked
    monkeypatch.setattr(sync, "Meter", Meter)
    server.restart()
    again = pull(st, "m", tmp_path / "out")
    assert again.resumed > 0 and again.bytes_moved + again.resumed == sum(
        e.size for e in again.manifest.files if e.path in again.transferred)
    for name in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "m" / name).read_bytes()
    assert not list((tmp_path / "out").rglob("*.inferry-part*"))


def test_destination_killed_mid_copy_then_rerun_completes(s3_server, s3_server_factory, tmp_path, monkeypatch):
    dest = s3_server_factory(access_key="copy-dest-key", secret_key="copy-dest-secret")
    s3_server.bucket("fault-copy-src")
    dest.bucket("fault-copy-dst")
    src, dst = settings(s3_server, "fault-copy-src", concurrency=2), settings(dest, "fault-copy-dst", concurrency=2)
    make_model(tmp_path / "m", shards=(12 << 20, 12 << 20))
    push(src, tmp_path / "m", "m")
    _kill_after(monkeypatch, dest, 8 << 20)
    with pytest.raises(StorageError):
        copy(src, "m", dst, "m")
    monkeypatch.setattr(sync, "Meter", Meter)
    dest.restart()
    copy(src, "m", dst, "m")
    assert verify(dst, "m").ok


def test_flipped_byte_is_named_by_verify_and_refused_by_pull(s3_server, tmp_path):
    s3_server.bucket("fault-flip")
    st = settings(s3_server, "fault-flip")
    make_model(tmp_path / "m")
    push(st, tmp_path / "m", "m")
    flip_byte(s3_server, "fault-flip", "m/model-00001-of-00002.safetensors", 7 << 20)
    result = verify(st, "m")
    assert [b.path for b in result.bad] == ["model-00001-of-00002.safetensors"]
    assert "sha256" in result.bad[0].problem
    with pytest.raises(StorageError, match="model-00001-of-00002.safetensors"):
        pull(st, "m", tmp_path / "out")
    assert not (tmp_path / "out" / "model-00001-of-00002.safetensors").exists()


def test_wrong_keys_are_a_clear_error(s3_server, tmp_path):
    s3_server.bucket("fault-keys")
    make_model(tmp_path / "m")
    st = settings(s3_server, "fault-keys", secret_key="not-the-secret")
    with pytest.raises(StorageError, match="rejected the credentials") as e:
        push(st, tmp_path / "m", "m")
    assert "not-the-secret" not in str(e.value)
    assert not any((s3_server.root / "fault-keys").iterdir())


def test_missing_bucket_and_missing_model(s3_server, tmp_path):
    make_model(tmp_path / "m")
    with pytest.raises(StorageError, match="bucket no-such-bucket does not exist"):
        push(settings(s3_server, "no-such-bucket"), tmp_path / "m", "m")
    s3_server.bucket("fault-empty")
    with pytest.raises(StorageError, match="no inferry-manifest.json under nothing-here"):
        pull(settings(s3_server, "fault-empty"), "nothing-here", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_folder_without_weights_sends_nothing(s3_server, tmp_path):
    s3_server.bucket("fault-noweights")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    with pytest.raises(StorageError, match="holds no weight files"):
        push(settings(s3_server, "fault-noweights"), tmp_path / "m", "m")
    with pytest.raises(StorageError, match="is not a folder"):
        push(settings(s3_server, "fault-noweights"), tmp_path / "absent", "m")
    assert ls(settings(s3_server, "fault-noweights")) == []


def test_endpoint_down_is_a_clear_error(s3_server, tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    st = settings(s3_server, "any-bucket")
    down = type(st)(f"http://127.0.0.1:{port}", st.region, "any-bucket", st.access_key, st.secret_key, retries=1,
                    connect_timeout=1.0)
    make_model(tmp_path / "m")
    with pytest.raises(StorageError, match="is not reachable"):
        push(down, tmp_path / "m", "m")
    with pytest.raises(StorageError, match="is not reachable"):
        pull(down, "m", tmp_path / "out")
    assert not (tmp_path / "out").exists()
