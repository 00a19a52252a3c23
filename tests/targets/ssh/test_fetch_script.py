"""The SSH hosts' weight fetch (infra/targets/ssh/scripts/fetch.sh) run for real against a real S3 server with
presigned URLs, with OpenSSL's hasher and with coreutils' sha256sum (a host whose openssl does not work): each
fetches every file, skips what it has, and refuses a file whose bytes differ from the manifest's sha256. A file
larger than the range size comes in byte ranges side by side; a failed range is asked again."""
from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

import infra.targets.ssh
from infra.storage.presign import presign_model
from infra.storage.settings import StoreSettings
from infra.targets.ssh.weights import MiB, RANGE_MIN, fetch_lines, range_bytes
from tests.support.storage_util import flip_byte, make_model

SCRIPT = Path(infra.targets.ssh.__file__).parent / "scripts" / "fetch.sh"
BUCKET = "weights"


@pytest.fixture
def presigned(s3_server, tmp_path) -> list:
    """The model's files with a presigned URL each, as `inferry up` signs them."""
    from infra.storage.sync import push

    s3_server.bucket(BUCKET)
    make_model(tmp_path / "model", shards=(3 << 20, 1 << 20, (4 << 20) + 64))
    settings = StoreSettings(s3_server.endpoint, s3_server.region, BUCKET, s3_server.access_key,
                             s3_server.secret_key)
    push(settings, tmp_path / "model", "m", show=False)
    return list(presign_model(settings, "m").files)


@pytest.fixture
def lines(presigned) -> str:
    """The manifest lines `inferry up` sends the host for this small model: one request per file."""
    return fetch_lines(presigned, range_bytes(sum(e.size for e in presigned), 4))


def stub(tmp_path: Path, name: str, script: str) -> None:
    """A NAME command first on fetch()'s PATH."""
    folder = tmp_path / "stubs"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(f"#!/bin/sh\n{script}\n")
    (folder / name).chmod(0o755)


def fetch(dest: Path, lines: str, hasher: str, tmp_path: Path, parallel: int = 4) -> subprocess.CompletedProcess:
    """fetch.sh as the host runs it (`set -- DIR PARALLEL` then the script), with a broken openssl first on PATH
    for `sha256sum`, and the stubs()."""
    if hasher == "sha256sum":
        stub(tmp_path, "openssl", "exit 1")
    path = f"{tmp_path / 'stubs'}:/usr/bin:/bin"
    return subprocess.run(["sh", "-c", f"set -- {dest} {parallel}; {SCRIPT.read_text()}"], input=lines, text=True,
                          capture_output=True, env={"PATH": path}, timeout=120, check=False)


@pytest.mark.parametrize("hasher", ["openssl", "sha256sum"])
def test_fetch_gets_every_file_then_skips_them(lines, hasher, tmp_path):
    dest = tmp_path / "weights"
    first = fetch(dest, lines, hasher, tmp_path)
    assert first.returncode == 0, first.stderr
    for line in lines.splitlines():
        sha, size, _, rel, _ = line.split(" ", 4)
        data = (dest / rel).read_bytes()
        assert len(data) == int(size) and hashlib.sha256(data).hexdigest() == sha, rel
    assert first.stdout.count("fetched ") == len(lines.splitlines())
    second = fetch(dest, lines, hasher, tmp_path)
    assert second.returncode == 0 and "fetched" not in second.stdout, second.stdout


@pytest.mark.parametrize("hasher", ["openssl", "sha256sum"])
def test_fetch_refuses_bytes_that_differ_from_the_manifest(s3_server, lines, hasher, tmp_path):
    shard = next(line.split(" ", 4)[3] for line in lines.splitlines() if int(line.split(" ", 4)[1]) > 1 << 20)
    flip_byte(s3_server, BUCKET, f"m/{shard}", at=1000)
    dest = tmp_path / "weights"
    r = fetch(dest, lines, hasher, tmp_path)
    assert r.returncode == 1 and f"sha256 mismatch: {shard}" in r.stderr, r.stderr
    assert not (dest / shard).exists() and not list(dest.rglob("*.part.*"))


def test_what_a_killed_fetch_left_is_removed_and_what_a_running_one_writes_is_not(presigned, lines, tmp_path):
    # A fetch's partial files carry its shell's pid: drop-partials.sh (run before the disk check) removes those of a
    # pid that no longer runs (they were kept for ever, a model's size of disk each time), not a running fetch's.
    dest = tmp_path / "weights"
    dest.mkdir()
    gone = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True).stdout.strip()
    with subprocess.Popen(["sleep", "60"]) as live:
        shard, small = presigned[0].path, presigned[-1].path
        left = [f"{shard}.part.{gone}.3", f"{shard}.part.{gone}.3.1048576", f"{small}.part.{gone}.0"]
        kept = [f"{shard}.part.{live.pid}.1", f"{small}.part.notapid"]
        for name in left + kept:
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).write_bytes(b"partial")
        dropped = subprocess.run(["sh", "-c", f"set -- {dest}; {(SCRIPT.parent / 'drop-partials.sh').read_text()}"],
                                 input="".join(f"{e.path}\n" for e in presigned), text=True, capture_output=True,
                                 timeout=60, check=False)
        r = fetch(dest, lines, "openssl", tmp_path)
        live.kill()
    assert dropped.returncode == 0 and r.returncode == 0, dropped.stderr + r.stderr
    assert sorted(p.name for p in dest.rglob("*.part.*")) == sorted(Path(n).name for n in kept)
    for e in presigned:
        assert hashlib.sha256((dest / e.path).read_bytes()).hexdigest() == e.sha256, e.path


def test_few_large_files_are_fetched_in_ranges_that_fill_the_parallel_requests():
    assert range_bytes(4 * 512 * MiB, 8) == 128 * MiB  # 4 shards, 8 files at a time: 16 ranges side by side
    assert range_bytes(16 * 512 * MiB, 8) == 512 * MiB  # 16 shards: one request per file
    assert range_bytes(100 * MiB, 8) == RANGE_MIN and range_bytes(0, 8) == RANGE_MIN
    assert range_bytes(5 * 10**9 + 1, 8) * 16 >= 5 * 10**9 + 1


def _logging_curl(tmp_path: Path, before: str = "") -> Path:
    """A curl that logs its byte range (or 'whole') to a file, runs BEFORE (shell, $r is the range), then the real
    curl."""
    log = tmp_path / "ranges.log"
    stub(tmp_path, "curl", 'r=whole; prev=""; for a in "$@"; do [ "$prev" = -r ] && r=$a; prev=$a; done\n'
                           f'echo "$r" >> {log}\n{before}\nexec /usr/bin/curl "$@"')
    return log


@pytest.mark.parametrize("part, ranges", [
    # 3 MiB in 3, and 4 MiB + 64 bytes in 4: whole MiB, the last one taking the 64 bytes (no range of 64 bytes)
    (1 * MiB, ["0-1048575", "1048576-2097151", "2097152-3145727",
               "0-1048575", "1048576-2097151", "2097152-3145727", "3145728-4194367"]),
    # about two ranges of 2 MiB each: 3 MiB in 1 + 2, 4 MiB + 64 in 2 + 2 (+ 64 bytes)
    (2 * MiB, ["0-1048575", "1048576-3145727", "0-2097151", "2097152-4194367"]),
])
def test_a_file_larger_than_the_range_size_comes_in_ranges_side_by_side(presigned, part, ranges, tmp_path):
    log, dest = _logging_curl(tmp_path), tmp_path / "weights"
    r = fetch(dest, fetch_lines(presigned, part), "openssl", tmp_path)
    assert r.returncode == 0, r.stderr
    for e in presigned:
        assert hashlib.sha256((dest / e.path).read_bytes()).hexdigest() == e.sha256, e.path
    asked = log.read_text().split()
    assert sorted(a for a in asked if a != "whole") == sorted(ranges)
    assert asked.count("whole") == len(presigned) - 2  # the 1 MiB shard and the small files: one request each
    assert not list(dest.rglob("*.part.*"))


def test_a_file_comes_in_at_most_twice_as_many_ranges_as_the_parallel_files(presigned, tmp_path):
    log, dest = _logging_curl(tmp_path), tmp_path / "weights"
    r = fetch(dest, fetch_lines(presigned, 1 * MiB), "openssl", tmp_path, parallel=1)
    assert r.returncode == 0, r.stderr
    for e in presigned:
        assert hashlib.sha256((dest / e.path).read_bytes()).hexdigest() == e.sha256, e.path
    assert sorted(a for a in log.read_text().split() if a != "whole") == sorted(
        ["0-1048575", "1048576-3145727", "0-2097151", "2097152-4194367"])  # 2 each, not 3 and 4


def test_a_range_that_fails_is_asked_again_and_the_file_is_whole(presigned, tmp_path):
    once = tmp_path / "failed-once"
    log = _logging_curl(tmp_path, f'[ "$r" = 3145728-4194367 ] && [ ! -e {once} ] && touch {once} && '
                                  'head -c 1000 /dev/zero && exit 18')  # a broken transfer, 1000 bytes in
    dest = tmp_path / "weights"
    r = fetch(dest, fetch_lines(presigned, 1 * MiB), "openssl", tmp_path)
    assert r.returncode == 0, r.stderr
    assert log.read_text().split().count("3145728-4194367") == 2  # the last range of the 4 MiB + 64 shard
    for e in presigned:
        assert hashlib.sha256((dest / e.path).read_bytes()).hexdigest() == e.sha256, e.path


@pytest.mark.parametrize("hasher", ["openssl", "sha256sum"])
def test_a_file_that_came_in_ranges_is_hashed_whole_and_a_changed_byte_in_any_range_is_refused(
        s3_server, presigned, hasher, tmp_path):
    # One changed byte in the third of four ranges is refused, and the other files come in whole.
    shard = next(e for e in presigned if e.size == (4 << 20) + 64)
    flip_byte(s3_server, BUCKET, f"m/{shard.path}", at=(2 << 20) + 12345)
    dest = tmp_path / "weights"
    r = fetch(dest, fetch_lines(presigned, 1 * MiB), hasher, tmp_path)
    assert r.returncode == 1 and f"sha256 mismatch: {shard.path}" in r.stderr, r.stderr
    assert not (dest / shard.path).exists() and not list(dest.rglob("*.part.*"))
    for e in presigned:
        if e is not shard:
            assert hashlib.sha256((dest / e.path).read_bytes()).hexdigest() == e.sha256, e.path


def test_a_store_that_ignores_byte_ranges_is_named_and_nothing_is_kept(presigned, tmp_path):
    # It answers every range with the whole object (200): written at each offset, the file is too long.
    stub(tmp_path, "curl", 'for a in "$@"; do shift; [ "$skip" = 1 ] && { skip=; continue; }; '
                           '[ "$a" = -r ] && { skip=1; continue; }; set -- "$@" "$a"; done; exec /usr/bin/curl "$@"')
    dest = tmp_path / "weights"
    r = fetch(dest, fetch_lines(presigned, 1 * MiB), "openssl", tmp_path)
    shard = next(e for e in presigned if e.size == 3 << 20)
    assert r.returncode == 1, r.stderr
    assert f"{shard.path}: " in r.stderr and "not 3145728 (does the store answer byte ranges?)" in r.stderr
    assert f"download failed: {shard.path}" in r.stderr
    assert not (dest / shard.path).exists() and not list(dest.rglob("*.part.*"))


def test_the_cache_listing_counts_model_files_not_the_marker_or_a_running_fetchs_partials(tmp_path):
    """The probe's `find` run for real on a folder holding a model file named like a part, a file with a newline in
    its name, fetch.sh's partial file of a running fetch and the marker: only the model's files are counted."""
    from infra.targets.ssh.weights import LISTING, MARKER, cached_files, listed

    files = {"weights.part.1.bin": b"one", "sub/x\ny 5": b"newline", "model.safetensors": b"whole",
             "model.safetensors.part.4242.0": b"partial", MARKER: b"digest"}
    for rel, data in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    listing = subprocess.run(["sh", "-c", LISTING], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert cached_files(listing) == {"weights.part.1.bin": 3, "sub/x\ny 5": 7, "model.safetensors": 5}
    assert listed(listing) == {rel: len(data) for rel, data in files.items()}  # what the weights probe looks up
