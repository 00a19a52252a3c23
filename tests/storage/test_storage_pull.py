"""Pull against a real server: which digest it checks, manifests from before xxh3, a file failing while others move."""
from __future__ import annotations

import json
import os

import pytest

from infra.errors import StorageError
from infra.storage.manifest import MANIFEST_NAME
from infra.storage.sync import pull, push
from infra.storage.verify import verify
from tests.support.storage_util import (edit_manifest, flip_byte, hash_cache_in_tmp, make_model,  # noqa: F401 - fixture
                                old_manifest_pulls_and_push_upgrades_it, settings, strip_fields, tree)


OLD = ("xxh3_128", "part_size", "parts")  # as versions before xxh3 wrote it (part digests came later still)


def test_pull_checks_xxh3_and_names_the_corrupt_file(s3_server, tmp_path):
    s3_server.bucket("pull-xxh")
    st = settings(s3_server, "pull-xxh")
    make_model(tmp_path / "m")
    pushed = push(st, tmp_path / "m", "m")
    assert all(len(e.xxh3_128) == 32 for e in pushed.manifest.files)
    flip_byte(s3_server, "pull-xxh", "m/model-00002-of-00002.safetensors", 3 << 20)
    with pytest.raises(StorageError) as e:
        pull(st, "m", tmp_path / "out")
    assert "model-00002-of-00002.safetensors: xxh3-128" in str(e.value) and "push the model again" in str(e.value)
    # The corrupt file leaves nothing; a file cut short beside it may keep its checked parts (and their log) for
    # the next pull to resume, which depends on how far it got when the other failed.
    assert not list((tmp_path / "out").glob("model-00002-of-00002.safetensors*"))
    for partial in (tmp_path / "out").glob("*.inferry-part"):
        assert partial.with_name(partial.name + "s").is_file(), f"{partial.name} kept without its parts log"


def test_manifest_from_before_xxh3_pulls_with_sha256_and_a_push_adds_xxh3_without_sending(s3_server, tmp_path):
    st = old_manifest_pulls_and_push_upgrades_it(s3_server, tmp_path, "pull-old", OLD)
    doc = json.loads((s3_server.root / "pull-old" / "m" / MANIFEST_NAME).read_text())
    assert all(len(f["xxh3_128"]) == 32 for f in doc["files"])

    strip_fields(st, "m", OLD)
    flip_byte(s3_server, "pull-old", "m/model-00001-of-00002.safetensors", 5)
    with pytest.raises(StorageError, match="model-00001-of-00002.safetensors: sha256"):
        pull(st, "m", tmp_path / "again")


def test_a_file_failing_while_others_move_leaves_no_partial_files_and_no_open_files(s3_server, tmp_path):
    s3_server.bucket("pull-cut")
    st = settings(s3_server, "pull-cut", concurrency=2)
    make_model(tmp_path / "m", shards=(12 << 20, 12 << 20, 12 << 20, 12 << 20))
    push(st, tmp_path / "m", "m")
    # The first big file is gone from the store: the files queued beside it (their HEADs sent,
    # none of their parts yet) must clean up too.
    st.client().delete_object(Bucket="pull-cut", Key="m/model-00001-of-00004.safetensors")
    with pytest.raises(StorageError) as e:
        pull(st, "m", tmp_path / "out")
    assert "model-00001-of-00004.safetensors" in str(e.value) and "not found" in str(e.value)
    assert not list((tmp_path / "out").glob("model-00001-of-00004.safetensors*"))
    for partial in (tmp_path / "out").glob("*.inferry-part"):  # a file that got parts in: kept to resume, with its log
        assert partial.with_name(partial.name + "s").is_file(), f"{partial.name} kept without its parts log"
    assert not _open_under(tmp_path / "out"), "files of the failed pull are still open"
    st.client().put_object(Bucket="pull-cut", Key="m/model-00001-of-00004.safetensors",  # mended through the store
                           Body=(tmp_path / "m" / "model-00001-of-00004.safetensors").read_bytes())
    pull(st, "m", tmp_path / "out")
    got = tree(tmp_path / "out")
    assert got.pop(MANIFEST_NAME) and got == tree(tmp_path / "m")


def _open_under(folder) -> list[str]:
    """Paths under folder that this process holds open."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(folder)):
            found.append(target)
    return found


def test_verify_checks_the_xxh3_pulls_rely_on(s3_server, tmp_path):
    s3_server.bucket("pull-verify")
    st = settings(s3_server, "pull-verify")
    make_model(tmp_path / "m")
    push(st, tmp_path / "m", "m")
    assert verify(st, "m").ok
    edit_manifest(st, "m", lambda f: f.update(xxh3_128="0" * 32) if f["path"] == "config.json" else None)
    result = verify(st, "m")
    assert [(b.path, b.problem.split()[0]) for b in result.bad] == [("config.json", "xxh3-128")]
    with pytest.raises(StorageError, match="config.json: xxh3-128"):
        pull(st, "m", tmp_path / "out")
