"""Helpers for the weight-store tests: small synthetic models and settings for a test server."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from infra.storage.settings import MiB, StoreSettings
from tests.servers.s3 import S3Server


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
