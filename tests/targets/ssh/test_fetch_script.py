"""The SSH hosts' weight fetch (infra/targets/ssh/scripts/fetch.sh) run for real against a real S3 server with
presigned URLs, with OpenSSL's hasher and with coreutils' sha256sum (a host whose openssl does not work): each
fetches every file, skips what it has, and refuses a file whose bytes differ from the manifest's sha256."""
from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

import infra.targets.ssh
from infra.storage.presign import presign_model
from infra.storage.settings import StoreSettings
from tests.support.storage_util import flip_byte, make_model

SCRIPT = Path(infra.targets.ssh.__file__).parent / "scripts" / "fetch.sh"
BUCKET = "weights"


@pytest.fixture
def lines(s3_server, tmp_path) -> str:
    """The manifest lines `inferry up` sends the host: sha256, size, path and a presigned URL per file."""
    from infra.storage.sync import push

    s3_server.bucket(BUCKET)
    make_model(tmp_path / "model", shards=(3 << 20, 1 << 20))
    settings = StoreSettings(s3_server.endpoint, s3_server.region, BUCKET, s3_server.access_key,
                             s3_server.secret_key)
    push(settings, tmp_path / "model", "m", show=False)
    return "".join(f"{e.sha256} {e.size} {e.path} {e.url}\n" for e in presign_model(settings, "m").files)


def fetch(dest: Path, lines: str, hasher: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """fetch.sh as the host runs it (`set -- DIR PARALLEL` then the script), with a broken openssl first on PATH
    for `sha256sum`."""
    path = "/usr/bin:/bin"
    if hasher == "sha256sum":
        stub = tmp_path / "broken-openssl"
        stub.mkdir(exist_ok=True)
        (stub / "openssl").write_text("#!/bin/sh\nexit 1\n")
        (stub / "openssl").chmod(0o755)
        path = f"{stub}:{path}"
    return subprocess.run(["sh", "-c", f"set -- {dest} 4; {SCRIPT.read_text()}"], input=lines, text=True,
                          capture_output=True, env={"PATH": path}, timeout=120, check=False)


@pytest.mark.parametrize("hasher", ["openssl", "sha256sum"])
def test_fetch_gets_every_file_then_skips_them(lines, hasher, tmp_path):
    dest = tmp_path / "weights"
    first = fetch(dest, lines, hasher, tmp_path)
    assert first.returncode == 0, first.stderr
    for line in lines.splitlines():
        sha, size, rel, _ = line.split(" ", 3)
        data = (dest / rel).read_bytes()
        assert len(data) == int(size) and hashlib.sha256(data).hexdigest() == sha, rel
    assert first.stdout.count("fetched ") == len(lines.splitlines())
    second = fetch(dest, lines, hasher, tmp_path)
    assert second.returncode == 0 and "fetched" not in second.stdout, second.stdout


@pytest.mark.parametrize("hasher", ["openssl", "sha256sum"])
def test_fetch_refuses_bytes_that_differ_from_the_manifest(s3_server, lines, hasher, tmp_path):
    shard = next(line.split(" ", 3)[2] for line in lines.splitlines() if int(line.split(" ", 3)[1]) > 1 << 20)
    flip_byte(s3_server, BUCKET, f"m/{shard}", at=1000)
    dest = tmp_path / "weights"
    r = fetch(dest, lines, hasher, tmp_path)
    assert r.returncode == 1 and f"sha256 mismatch: {shard}" in r.stderr, r.stderr
    assert not (dest / shard).exists() and not list(dest.rglob("*.part.*"))
