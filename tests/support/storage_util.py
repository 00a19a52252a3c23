"""Helpers for the weight-store tests: small synthetic models and settings for a test server."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from infra.storage.manifest import MANIFEST_NAME
from infra.storage.settings import MiB, StoreSettings
from infra.storage.sync import pull, push
from tests.support.servers.s3 import S3Server


@pytest.fixture(autouse=True)
def hash_cache_in_tmp(tmp_path, monkeypatch):
    """Keep the sha256 cache of each test in its own folder."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


def make_model(folder: Path, shards: tuple[int, ...] = (12 * MiB, 7 * MiB), seed: int = 1) -> dict[str, str]:
    """A small Hugging Face-like folder: safetensors shards plus small files; returns {path: sha256}."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {"config.json": b'{"architectures": ["LlamaForCausalLM"]}', "tokenizer/tokenizer.json": b"{}" * 1000,
             "generation_config.json": b""}
    for i, size in enumerate(shards, 1):
        files[f"model-{i:05d}-of-{len(shards):05d}.safetensors"] = _bytes(size, seed * 100 + i)
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    return {rel: hashlib.sha256(data).hexdigest() for rel, data in files.items()}


def _bytes(size: int, seed: int) -> bytes:
    block = hashlib.sha256(str(seed).encode()).digest() * 2048 + os.urandom(16)  # ~64 KiB, distinct per file
    return (block * (size // len(block) + 1))[:size]


def settings(server: S3Server, bucket: str, **kw) -> StoreSettings:
    """Settings for a test server; 5 MiB parts so small files still go multipart."""
    base = {"endpoint": server.endpoint, "region": server.region, "bucket": bucket, "access_key": server.access_key,
            "secret_key": server.secret_key, "part_size": 5 * MiB, "concurrency": 4, "retries": 1,
            "connect_timeout": 2.0, "read_timeout": 10.0}
    return StoreSettings(**{**base, **kw})


def tree(folder: Path) -> dict[str, str]:
    """{relative path: sha256} of every file under a folder."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def flip_byte(server: S3Server, bucket: str, key: str, at: int) -> None:
    """Flip one bit of a stored object in place, behind the store's back (same size: rclone's cache still holds)."""
    stored = server.root / bucket / key
    data = bytearray(stored.read_bytes())
    data[at] ^= 0x01
    stored.write_bytes(bytes(data))


def edit_manifest(st: StoreSettings, prefix: str, change) -> None:
    """Rewrite each file entry of a stored manifest with change(entry), through the store (it caches sizes)."""
    s3, key = st.client(), f"{prefix}/{MANIFEST_NAME}"
    doc = json.loads(s3.get_object(Bucket=st.bucket, Key=key)["Body"].read())
    for f in doc["files"]:
        change(f)
    s3.put_object(Bucket=st.bucket, Key=key, Body=json.dumps(doc).encode())


def strip_fields(st: StoreSettings, prefix: str, fields: tuple[str, ...]) -> None:
    """The stored manifest as an older version wrote it: without these file fields."""
    edit_manifest(st, prefix, lambda f: [f.pop(k, None) for k in fields])


def old_manifest_pulls_and_push_upgrades_it(server: S3Server, tmp_path: Path, bucket: str,
                                             fields: tuple[str, ...]) -> StoreSettings:
    """Push, strip `fields` from the manifest, pull (every byte as pushed), push again (sends nothing)."""
    server.bucket(bucket)
    st = settings(server, bucket)
    want = make_model(tmp_path / "m")
    push(st, tmp_path / "m", "m")
    strip_fields(st, "m", fields)
    pull(st, "m", tmp_path / "out")
    got = tree(tmp_path / "out")
    assert got.pop(MANIFEST_NAME) and got == want
    again = push(st, tmp_path / "m", "m")
    assert again.bytes_moved == 0 and again.transferred == ()
    return st
