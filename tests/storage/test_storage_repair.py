"""Repairing a corrupt stored model: verify names the bad file and prints the command; that command re-sends only it.

The store is corrupted behind its back (same size, other bytes) in the rclone server's data folder;
what was re-sent is seen in that folder (which files were rewritten) and by a counting proxy.
"""
from __future__ import annotations

import shlex
from pathlib import Path

from infra.storage.manifest import MANIFEST_NAME
from infra.storage.sync import copy, push
from infra.storage.verify import verify
from tests.support.servers.proxy import CountingProxy
from tests.support.storage_util import flip_byte, hash_cache_in_tmp, make_model, settings  # noqa: F401 - fixture

BAD = "model-00001-of-00002.safetensors"
SLACK = 64 << 10  # HTTP heads and the manifest


def _stamps(folder: Path) -> dict[str, tuple[int, int]]:
    """(inode, mtime) of every stored file: an object written again gets a new one."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file()}


def _printed_command(output: str) -> list[str]:
    """The `inferry weights ...` command a failed verify printed as its fix."""
    [line] = [ln.strip() for ln in output.splitlines() if ln.strip().startswith("inferry weights ")]
    return shlex.split(line)


def test_verify_prints_the_repair_and_it_re_sends_only_the_bad_file(cli, s3_server, tmp_path, monkeypatch):
    s3_server.bucket("repair-push")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_key)
    make_model(tmp_path / "m")
    data = s3_server.root / "repair-push" / "m"
    with CountingProxy(s3_server.endpoint) as proxy:
        store = ["--prefix", "m", "--endpoint", proxy.endpoint, "--bucket", "repair-push", "--part-size-mib", "5"]
        assert cli("weights", "push", str(tmp_path / "m"), *store).exit_code == 0
        flip_byte(s3_server, "repair-push", f"m/{BAD}", 7 << 20)
        r = cli("weights", "verify", *store)
        assert r.exit_code == 1 and f"{BAD}: sha256" in r.output
        argv = _printed_command(r.output)
        assert argv[:4] == ["inferry", "weights", "push", str((tmp_path / "m").resolve())]
        assert argv[-2:] == ["--repair", BAD] and argv.count("--repair") == 1
        before = _stamps(data)
        proxy.reset()
        r = cli(*argv[1:])
        assert r.exit_code == 0 and "1 file(s) transferred, 4 already there" in r.output, r.output
        sent = proxy.up
        r = cli("weights", "verify", *store)
        assert r.exit_code == 0 and "OK 5 file(s)" in r.output
    after = _stamps(data)
    assert {name for name in before if before[name] != after[name]} == {BAD, MANIFEST_NAME}
    size = (tmp_path / "m" / BAD).stat().st_size
    assert size <= sent < size + SLACK, f"{sent} bytes sent to repair a {size}-byte file"
    assert (data / BAD).read_bytes() == (tmp_path / "m" / BAD).read_bytes()


def test_a_copied_model_is_repaired_from_its_source(cli, s3_server, s3_server_factory, tmp_path, monkeypatch):
    other = s3_server_factory(access_key="repair-dest-access", secret_key="repair-dest-secret")
    s3_server.bucket("repair-src")
    other.bucket("repair-dst")
    src, dst = settings(s3_server, "repair-src"), settings(other, "repair-dst")
    make_model(tmp_path / "m")
    push(src, tmp_path / "m", "m", show=False)
    copy(src, "m", dst, "copied", show=False)
    flip_byte(other, "repair-dst", f"copied/{BAD}", 3)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", other.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", other.secret_key)
    r = cli("weights", "verify", "-p", "copied", "--endpoint", other.endpoint, "--bucket", "repair-dst")
    assert r.exit_code == 1 and f"{BAD}: sha256" in r.output
    argv = _printed_command(r.output)
    assert argv == ["inferry", "weights", "copy", "--endpoint", s3_server.endpoint, "--bucket", "repair-src",
                    "--prefix", "m", "--to-endpoint", other.endpoint, "--to-bucket", "repair-dst",
                    "--to-prefix", "copied", "--repair", BAD]
    assert "DEST_AWS_ACCESS_KEY_ID" in r.output  # where the printed command takes each store's keys from
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_key)
    monkeypatch.setenv("DEST_AWS_ACCESS_KEY_ID", other.access_key)
    monkeypatch.setenv("DEST_AWS_SECRET_ACCESS_KEY", other.secret_key)
    before = _stamps(other.root / "repair-dst" / "copied")
    r = cli(*argv[1:])
    assert r.exit_code == 0 and "1 file(s) transferred" in r.output, r.output
    after = _stamps(other.root / "repair-dst" / "copied")
    assert {name for name in before if before[name] != after[name]} == {BAD, MANIFEST_NAME}
    assert verify(dst, "copied").ok


def test_repair_of_a_file_the_model_does_not_have_is_refused(cli, s3_server, tmp_path, monkeypatch):
    s3_server.bucket("repair-unknown")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_key)
    make_model(tmp_path / "m")
    r = cli("weights", "push", str(tmp_path / "m"), "-p", "m", "--endpoint", s3_server.endpoint,
            "--bucket", "repair-unknown", "--repair", "model-00009-of-00009.safetensors")
    assert r.exit_code == 1 and "model-00009-of-00009.safetensors: not a file of the model" in r.output
    assert not any((s3_server.root / "repair-unknown").iterdir())
