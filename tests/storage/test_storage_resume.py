"""Resume inside one large file: a push or pull SIGKILLed mid-file, then run again.

What crossed the wire is counted by a TCP proxy in front of the real server, never by inferry;
what the store held at the kill is asked of the store itself; results are checked by sha256.
"""
from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infra.storage.settings import MiB
from infra.storage.sync import push
from tests.conftest import ROOT
from tests.support.servers.proxy import CountingProxy
from tests.support.storage_util import hash_cache_in_tmp, make_model, settings  # noqa: F401 - fixture

SIZE, PART = 48 * MiB, 5 * MiB  # one shard of 10 parts
BIG = "model-00001-of-00001.safetensors"
SLACK = 256 << 10  # HTTP heads, the small files and the manifest: far below one part


def _cmd(verb: str, folder: Path, proxy: CountingProxy, bucket: str) -> list[str]:
    return [sys.executable, "-m", "cli.main", "weights", verb, str(folder), "--prefix", "big", "--endpoint",
            proxy.endpoint, "--bucket", bucket, "--part-size-mib", "5", "--concurrency", "2"]


def _env(server) -> dict[str, str]:
    return {**os.environ, "AWS_ACCESS_KEY_ID": server.access_key, "AWS_SECRET_ACCESS_KEY": server.secret_key}


def _kill_when(proxy: CountingProxy, cmd: list[str], env: dict[str, str], **limit: int) -> None:
    """Run cmd and SIGKILL it the moment `limit` bytes (up= or down=) have crossed the proxy."""
    procs: list[subprocess.Popen] = []
    proxy.cut_after(**limit, then=lambda: [p.kill() for p in procs])
    procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    out, _ = procs[0].communicate(timeout=180)
    assert procs[0].returncode == -signal.SIGKILL, out  # killed mid-transfer, not finished or failed


def _run(cmd: list[str], env: dict[str, str]) -> str:
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _held(s3, bucket: str, key: str, upload_id: str) -> int:
    """Bytes of the parts the store holds for an upload, once it has finished taking in what reached it."""
    seen: list[int] = []
    while len(seen) < 3 or len(set(seen[-3:])) > 1:  # a part that fully arrived may still be landing
        parts = s3.list_parts(Bucket=bucket, Key=key, UploadId=upload_id).get("Parts", [])
        seen.append(sum(p["Size"] for p in parts))
        time.sleep(0.2)
        assert len(seen) < 100, seen
    return seen[-1]


def _open_uploads(s3, bucket: str) -> list[dict]:
    return s3.list_multipart_uploads(Bucket=bucket, Prefix="big/").get("Uploads", [])


@pytest.mark.parametrize("part_log", ["kept", "lost"])
def test_push_killed_inside_one_file_sends_only_the_parts_the_store_lacks(s3_server_factory, tmp_path, part_log):
    server = s3_server_factory()
    server.bucket("resume-push")
    make_model(tmp_path / "m", shards=(SIZE,))
    s3, env = server.boto3_client(), _env(server)
    with CountingProxy(server.endpoint) as proxy:
        cmd = _cmd("push", tmp_path / "m", proxy, "resume-push")
        _kill_when(proxy, cmd, env, up=30 * MiB)
        [upload] = _open_uploads(s3, "resume-push")
        held = _held(s3, "resume-push", "big/" + BIG, upload["UploadId"])
        assert 2 * PART <= held < SIZE, "the store holds some, not all, of the file"
        if part_log == "lost":  # parts acknowledged but never journaled: checked by their MD5 instead
            logs = list((tmp_path / "xdg-cache" / "inferry" / "journal").glob("*.parts"))
            assert len(logs) == 1
            logs[0].unlink()
        proxy.reset()
        out = _run(cmd, env)
        sent = proxy.up
    assert SIZE - held <= sent < SIZE - held + SLACK, f"sent {sent} bytes; the store lacked {SIZE - held}"
    assert "resumed" in out
    assert _sha(server.root / "resume-push" / "big" / BIG) == _sha(tmp_path / "m" / BIG)
    assert _open_uploads(s3, "resume-push") == []


def test_push_aborts_the_uploads_it_cannot_resume(s3_server_factory, tmp_path):
    server = s3_server_factory()
    server.bucket("resume-stale")
    make_model(tmp_path / "m", shards=(SIZE,))
    s3, env = server.boto3_client(), _env(server)
    # Left by another client before this push: no journal knows what it holds.
    stray = s3.create_multipart_upload(Bucket="resume-stale", Key="big/old-00001.safetensors")["UploadId"]
    s3.upload_part(Bucket="resume-stale", Key="big/old-00001.safetensors", UploadId=stray, PartNumber=1,
                   Body=b"x" * PART)
    with CountingProxy(server.endpoint) as proxy:
        cmd = _cmd("push", tmp_path / "m", proxy, "resume-stale")
        _kill_when(proxy, cmd, env, up=20 * MiB)
        assert len(_open_uploads(s3, "resume-stale")) == 2
        make_model(tmp_path / "m", shards=(SIZE,), seed=2)  # same size, other bytes: the open upload is stale
        proxy.reset()
        _run(cmd, env)
        sent = proxy.up
    assert sent >= SIZE, "nothing of the old content may be reused"
    assert _sha(server.root / "resume-stale" / "big" / BIG) == _sha(tmp_path / "m" / BIG)
    assert _open_uploads(s3, "resume-stale") == [], "stale uploads keep holding storage"


def _good_parts(partial: Path, source: Path) -> int:
    """How many whole parts of a partial file already hold the source's bytes (checked by the test, not inferry)."""
    got, want = partial.read_bytes(), source.read_bytes()
    return sum(got[i:i + PART] == want[i:i + PART] for i in range(0, SIZE, PART))


def test_pull_killed_inside_one_file_fetches_only_what_it_lacks(s3_server_factory, tmp_path):
    server = s3_server_factory()
    server.bucket("resume-pull")
    make_model(tmp_path / "m", shards=(SIZE,))
    push(settings(server, "resume-pull"), tmp_path / "m", "big", show=False)
    out, env = tmp_path / "out", _env(server)
    partial = out / (BIG + ".inferry-part")
    with CountingProxy(server.endpoint) as proxy:
        cmd = _cmd("pull", out, proxy, "resume-pull")
        _kill_when(proxy, cmd, env, down=30 * MiB)
        first = proxy.down
        assert partial.is_file() and not (out / BIG).exists()
        good = _good_parts(partial, tmp_path / "m" / BIG)
        assert good >= 4  # of the 6 parts' worth that arrived, at most 2 were in flight
        with open(partial, "r+b") as f:  # damage a kept part: the rerun must notice and fetch it again
            f.seek(PART // 2)
            byte = f.read(1)
            f.seek(PART // 2)
            f.write(bytes([byte[0] ^ 1]))
        proxy.reset()
        _run(cmd, env)
        second = proxy.down
    assert _sha(out / BIG) == _sha(tmp_path / "m" / BIG)
    assert not list(out.rglob("*.inferry-part*"))
    # Fetched again: the damaged part, and of the good ones at most the 2 whose worker had not logged them yet.
    assert second <= SIZE - (good - 3) * PART + SLACK
    assert first + second <= SIZE + 3 * PART + SLACK, f"{first} + {second} bytes for a {SIZE}-byte file"
