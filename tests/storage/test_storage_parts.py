"""Per-part digests in the manifest: written by push, checked by pull from each part's buffer, verified; old manifests."""
from __future__ import annotations

import json
import os

import pytest
import xxhash

from infra.errors import StorageError
from infra.storage.local import HashCache
from infra.storage.manifest import MANIFEST_NAME, FileEntry, Manifest
from infra.storage.settings import MiB
from infra.storage.sync import pull, push
from infra.storage.verify import verify
from tests.support.storage_util import (edit_manifest, flip_byte, hash_cache_in_tmp, make_model,  # noqa: F401 - fixture
                                old_manifest_pulls_and_push_upgrades_it, settings, strip_fields, tree)

SHARDS = (12 * MiB, 7 * MiB)  # 5 MiB parts: 3 and 2 parts (make_model's default)
OLD = ("part_size", "parts")  # as written before part digests


def _parts(data: bytes, size: int) -> tuple[str, ...]:
    return tuple(xxhash.xxh3_128(data[i:i + size]).hexdigest() for i in range(0, len(data), size))


def test_push_records_the_digest_of_every_part_of_multipart_files_only(s3_server, tmp_path):
    s3_server.bucket("parts-push")
    st = settings(s3_server, "parts-push")
    make_model(tmp_path / "m", shards=SHARDS)
    by_path = push(st, tmp_path / "m", "m").manifest.by_path()
    for rel in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        e = by_path[rel]
        assert e.part_size == 5 * MiB and e.parts == _parts((tmp_path / "m" / rel).read_bytes(), 5 * MiB)
    assert len(by_path["model-00001-of-00002.safetensors"].parts) == 3
    assert by_path["config.json"].parts == () and by_path["config.json"].part_size == 0
    stored = json.loads((s3_server.root / "parts-push" / "m" / MANIFEST_NAME).read_text())
    assert "parts" not in next(f for f in stored["files"] if f["path"] == "config.json")


def test_pull_by_part_reads_nothing_back_and_gets_every_byte(s3_server, tmp_path, monkeypatch):
    s3_server.bucket("parts-pull")
    st = settings(s3_server, "parts-pull")
    want = make_model(tmp_path / "m", shards=SHARDS)
    push(st, tmp_path / "m", "m")
    reads = []
    real = os.preadv
    monkeypatch.setattr(os, "preadv", lambda *a: reads.append(a) or real(*a))
    pull(st, "m", tmp_path / "out")
    got = tree(tmp_path / "out")
    assert got.pop(MANIFEST_NAME) and got == want
    assert reads == [], "a part was read back from the file to be hashed"


def test_a_corrupt_part_is_named_and_nothing_is_left_behind(s3_server, tmp_path):
    s3_server.bucket("parts-bad")
    st = settings(s3_server, "parts-bad")
    make_model(tmp_path / "m", shards=SHARDS)
    push(st, tmp_path / "m", "m")
    flip_byte(s3_server, "parts-bad", "m/model-00001-of-00002.safetensors", 6 * MiB)  # inside part 2
    with pytest.raises(StorageError) as e:
        pull(st, "m", tmp_path / "out")
    assert "model-00001-of-00002.safetensors: xxh3-128 of part 2 of 3" in str(e.value)
    assert "push the model again" in str(e.value)
    assert not (tmp_path / "out" / "model-00001-of-00002.safetensors").exists()
    assert not [p.name for p in (tmp_path / "out").iterdir() if ".inferry-part" in p.name]
    bad = verify(st, "m").bad
    assert [b.path for b in bad] == ["model-00001-of-00002.safetensors"]


def test_verify_names_a_manifest_part_digest_that_pulls_would_refuse(s3_server, tmp_path):
    s3_server.bucket("parts-verify")
    st = settings(s3_server, "parts-verify")
    make_model(tmp_path / "m", shards=SHARDS)
    push(st, tmp_path / "m", "m")
    assert verify(st, "m").ok
    edit_manifest(st, "m", lambda f: f["path"].startswith("model-00002") and f["parts"].__setitem__(1, "0" * 32))
    assert [(b.path, b.problem) for b in verify(st, "m").bad] == [
        ("model-00002-of-00002.safetensors", "part 2 xxh3-128 != manifest")]
    with pytest.raises(StorageError, match="model-00002-of-00002.safetensors: xxh3-128 of part 2 of 2"):
        pull(st, "m", tmp_path / "out")


def test_manifest_without_part_digests_still_pulls_checked_and_a_push_adds_them_sending_nothing(s3_server, tmp_path):
    st = old_manifest_pulls_and_push_upgrades_it(s3_server, tmp_path, "parts-old", OLD)
    stored = Manifest.from_json((s3_server.root / "parts-old" / "m" / MANIFEST_NAME).read_text())
    assert len(stored.by_path()["model-00001-of-00002.safetensors"].parts) == 3
    strip_fields(st, "m", OLD)
    flip_byte(s3_server, "parts-old", "m/model-00001-of-00002.safetensors", 6 * MiB)
    with pytest.raises(StorageError, match="model-00001-of-00002.safetensors: xxh3-128 "):  # the whole-file check
        pull(st, "m", tmp_path / "again")


@pytest.mark.parametrize("entry, problem", [
    ({"part_size": 5 * MiB, "parts": ["ab" * 16]}, "1 part digest(s) for 12582912 bytes"),
    ({"part_size": 0, "parts": ["ab" * 16] * 3}, "3 part digest(s)"),
    ({"part_size": 5 * MiB, "parts": ["ab" * 16, "ab" * 16, "zz" * 16]}, "not 32 hex digits"),
    ({"part_size": 5 * MiB, "parts": "ab" * 48}, "part digest(s)"),
])
def test_manifest_refuses_part_digests_that_do_not_cover_the_file(entry, problem):
    doc = {"version": 1, "total": 12 * MiB,
           "files": [{"path": "w.safetensors", "size": 12 * MiB, "sha256": "ab" * 32, **entry}]}
    with pytest.raises(StorageError, match="not a valid manifest") as e:
        Manifest.from_json(json.dumps(doc))
    assert problem in str(e.value)


def test_manifest_round_trips_part_digests():
    e = FileEntry("w.safetensors", 12 * MiB, "ab" * 32, "cd" * 16, 5 * MiB, ("01" * 16, "23" * 16, "45" * 16))
    assert Manifest.from_json(Manifest((e,), "x").to_json()).files == (e,)


def test_hash_cache_adds_part_digests_to_entries_from_before_them(tmp_path):
    data = os.urandom(11 * MiB)
    (tmp_path / "w.safetensors").write_bytes(data)
    st_ = (tmp_path / "w.safetensors").stat()
    cache = HashCache(tmp_path, lambda size: 4 * MiB)
    cache.entries["w.safetensors"] = [st_.st_size, st_.st_mtime_ns, st_.st_ino, "stale-sha", "stale-xxh"]
    e = cache.entry("w.safetensors", st_)
    assert e.part_size == 4 * MiB and e.parts == _parts(data, 4 * MiB) and e.sha256 != "stale-sha"
    assert HashCache(tmp_path).get("w.safetensors", st_) is None  # not saved yet
    cache.save()
    assert HashCache(tmp_path).get("w.safetensors", st_) == e
