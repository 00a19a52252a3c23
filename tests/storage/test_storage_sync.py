"""push, pull, copy and verify against real rclone S3 servers: content, skips, manifest, two providers."""
from __future__ import annotations

import json

from infra.storage.manifest import MANIFEST_NAME
from infra.storage.sync import copy, pull, push
from infra.storage.verify import ls, verify
from tests.support.storage_util import hash_cache_in_tmp, make_model, settings, tree  # noqa: F401 - fixture


def test_push_pull_round_trip_with_manifest(s3_server, tmp_path):
    s3_server.bucket("sync-rt")
    st = settings(s3_server, "sync-rt")
    want = make_model(tmp_path / "model")
    pushed = push(st, tmp_path / "model", "llama")
    assert sorted(pushed.transferred) == sorted(want) and pushed.bytes_moved == sum(
        (tmp_path / "model" / p).stat().st_size for p in want)
    doc = json.loads((s3_server.root / "sync-rt" / "llama" / MANIFEST_NAME).read_text())
    assert {f["path"]: f["sha256"] for f in doc["files"]} == want
    assert doc["total"] == pushed.manifest.total and doc["source"].startswith("file://") and doc["created"]
    pulled = pull(st, "llama", tmp_path / "out")
    got = tree(tmp_path / "out")
    assert got.pop(MANIFEST_NAME) and got == want
    assert pulled.bytes_moved == pushed.bytes_moved
    assert verify(st, "llama").ok


def test_unchanged_resync_sends_nothing_and_changed_file_is_the_only_one_sent(s3_server, tmp_path):
    s3_server.bucket("sync-skip")
    st = settings(s3_server, "sync-skip")
    make_model(tmp_path / "m")
    push(st, tmp_path / "m", "m")
    again = push(st, tmp_path / "m", "m")
    assert again.transferred == () and again.bytes_moved == 0
    (tmp_path / "m" / "config.json").write_text('{"changed": true}')
    third = push(st, tmp_path / "m", "m")
    assert third.transferred == ("config.json",)
    pull(st, "m", tmp_path / "out")
    assert pull(st, "m", tmp_path / "out").bytes_moved == 0
    assert (tmp_path / "out" / "config.json").read_text() == '{"changed": true}'


def test_push_without_manifest_reuses_objects_by_their_sha256_metadata(s3_server, tmp_path):
    s3_server.bucket("sync-meta")
    st = settings(s3_server, "sync-meta")
    make_model(tmp_path / "m")
    push(st, tmp_path / "m", "m")
    s3_server.boto3_client().delete_object(Bucket="sync-meta", Key=f"m/{MANIFEST_NAME}")
    assert [x.complete for x in ls(st)] == [False]
    redo = push(st, tmp_path / "m", "m")
    assert redo.bytes_moved == 0 and redo.transferred == ()
    assert [x.complete for x in ls(st)] == [True]


def test_copy_between_two_providers_with_different_keys(s3_server, s3_server_factory, tmp_path):
    other = s3_server_factory(access_key="provider-b-access", secret_key="provider-b-secret-key")
    s3_server.bucket("copy-src")
    other.bucket("copy-dst")
    src, dst = settings(s3_server, "copy-src"), settings(other, "copy-dst")
    want = make_model(tmp_path / "m")
    push(src, tmp_path / "m", "llama")
    done = copy(src, "llama", dst, "models/llama")
    assert sorted(done.transferred) == sorted(want)
    assert done.manifest.source == f"s3://copy-src/llama at {s3_server.endpoint}"
    assert verify(dst, "models/llama").ok
    assert copy(src, "llama", dst, "models/llama").bytes_moved == 0
    pull(dst, "models/llama", tmp_path / "out")
    assert {k: v for k, v in tree(tmp_path / "out").items() if k != MANIFEST_NAME} == want


def test_copy_within_one_store_is_server_side_and_verified(s3_server, tmp_path):
    s3_server.bucket("copy-same")
    st = settings(s3_server, "copy-same")
    make_model(tmp_path / "m")
    push(st, tmp_path / "m", "a")
    done = copy(st, "a", st.with_bucket("copy-same"), "b")
    assert len(done.transferred) == 5
    assert verify(st, "b").ok
    assert {m.prefix for m in ls(st)} == {"a", "b"}
