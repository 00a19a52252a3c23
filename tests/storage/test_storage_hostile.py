"""A manifest from the bucket is hostile input: paths that leave the model folder, control characters and bad
digests are refused before anything is fetched or written (pull here; the SSH fetch in tests/targets/ssh)."""
from __future__ import annotations

import json

import pytest

from infra.errors import StorageError
from infra.storage.manifest import MANIFEST_NAME, FileEntry, Manifest
from infra.storage.sync import pull, push
from tests.support.storage_util import edit_manifest, make_model, settings

GOOD = "ab" * 32
HOSTILE = [
    ("../../etc/cron.d/inferry", GOOD, "'..' part"),
    ("/etc/cron.d/inferry", GOOD, "absolute"),
    ("config.json\n" + GOOD + " 3 ../x https://attacker.example/x", GOOD, "control character"),
    ("a\x1b]0;owned\x07.json", GOOD, "control character"),
    ("weights//x.safetensors", GOOD, "empty, '.' or '..' part"),
    ("sub/./x.safetensors", GOOD, "empty, '.' or '..' part"),
    ("..\\..\\x", GOOD, "backslash"),
    (".inferry-manifest", GOOD, "inferry's own"),
    ("x.safetensors", "AB" * 32, "64 lowercase hex"),
    ("x.safetensors", "ab" * 31, "64 lowercase hex"),
    ("x.safetensors", GOOD + "\nzz", "64 lowercase hex"),
]


def doc(path: str, sha: str, size: object = 3) -> str:
    """A manifest of one good file and one entry under test."""
    files = [{"path": "ok.json", "size": 2, "sha256": GOOD}, {"path": path, "size": size, "sha256": sha}]
    return json.dumps({"version": 1, "files": files, "source": "s3://b/m"})


@pytest.mark.parametrize("path,sha,why", HOSTILE)
def test_a_hostile_entry_is_refused_by_index_and_escaped_path(path, sha, why):
    with pytest.raises(StorageError) as e:
        Manifest.from_json(doc(path, sha), "s3://b/m/inferry-manifest.json at https://s3.example")
    text = e.value.render()
    assert f"files[1] {ascii(path)[:120]}" in text and why in text
    assert text.startswith("s3://b/m/inferry-manifest.json at https://s3.example: ")
    assert "\n" not in e.value.message and "\x1b" not in text  # the hostile text is never printed raw
    assert "write access" in e.value.fix


def test_sizes_must_be_integers_and_paths_unique():
    with pytest.raises(StorageError, match="size an integer"):
        Manifest.from_json(doc("x.bin", GOOD, size="3"))
    with pytest.raises(StorageError, match="negative"):
        Manifest.from_json(doc("x.bin", GOOD, size=-1))
    with pytest.raises(StorageError, match=r"files\[1\] 'ok.json': the path is listed twice"):
        Manifest.from_json(doc("ok.json", GOOD))
    fine = Manifest.from_json(doc("sub/dir/model-00001-of-00002.safetensors", GOOD))
    assert fine.by_path()["sub/dir/model-00001-of-00002.safetensors"] == FileEntry(
        "sub/dir/model-00001-of-00002.safetensors", 3, GOOD)


def test_pull_of_a_hostile_manifest_writes_nothing(s3_server, tmp_path):
    s3_server.bucket("hostile-pull")
    st = settings(s3_server, "hostile-pull")
    make_model(tmp_path / "m")
    push(st, tmp_path / "m", "m")
    target = tmp_path / "escaped.txt"
    first = [True]

    def aim_outside(f: dict) -> None:  # the attacker points one entry past the folder, at a real object
        if first[0]:
            f["path"] = f"../{target.name}"
            first[0] = False

    edit_manifest(st, "m", aim_outside)
    out = tmp_path / "out" / "model"
    with pytest.raises(StorageError) as e:
        pull(st, "m", out)
    assert f"files[0] '../{target.name}'" in e.value.render() and "s3://hostile-pull/m/" in e.value.render()
    assert not target.exists() and not (tmp_path / "out").exists()


def test_push_refuses_a_file_name_every_host_would_refuse(s3_server, tmp_path):
    s3_server.bucket("hostile-push")
    st = settings(s3_server, "hostile-push")
    make_model(tmp_path / "m")
    (tmp_path / "m" / "notes\nfor-you.txt").write_text("x")
    with pytest.raises(StorageError) as e:
        push(st, tmp_path / "m", "m")
    assert "'notes\\nfor-you.txt': the path holds a control character" in e.value.render()
    assert "rename or remove the file" in e.value.render()
    assert not list((s3_server.root / "hostile-push").rglob("*"))  # nothing moved
    assert not (s3_server.root / "hostile-push" / "m" / MANIFEST_NAME).exists()
