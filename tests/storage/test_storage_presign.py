"""Presigned SigV4 URLs fetched with real curl: bytes match, expiry and tampering are refused."""
from __future__ import annotations

import hashlib
import subprocess

import pytest

from infra.errors import StorageError
from infra.storage.presign import presign_model
from infra.storage.sync import push
from tests.support.storage_util import hash_cache_in_tmp, make_model, settings  # noqa: F401 - fixture


@pytest.fixture(scope="module")
def pushed(s3_server, tmp_path_factory):
    s3_server.bucket("presign")
    st = settings(s3_server, "presign")
    folder = tmp_path_factory.mktemp("presign") / "m"
    want = make_model(folder, shards=(6 << 20,))
    push(st, folder, "models/llama")
    return st, want


def _curl(url: str, out) -> subprocess.CompletedProcess:
    return subprocess.run(["curl", "-fsS", "-o", str(out), url], capture_output=True, text=True, timeout=30)


def test_curl_fetches_every_file_by_presigned_url(pushed, tmp_path):
    st, want = pushed
    model = presign_model(st, "models/llama", expires_s=600)
    assert {f.path for f in model.files} == set(want)
    for f in model.files:
        assert "X-Amz-Signature=" in f.url and "X-Amz-Algorithm=AWS4-HMAC-SHA256" in f.url
        assert st.secret_key not in f.url
        out = tmp_path / f.path.replace("/", "_")
        assert _curl(f.url, out).returncode == 0
        assert hashlib.sha256(out.read_bytes()).hexdigest() == f.sha256 == want[f.path]


def test_fetch_script_downloads_and_checks(pushed, tmp_path):
    st, want = pushed
    model = presign_model(st, "models/llama", 600)
    assert "X-Amz-" not in repr(model)  # URLs are bearer credentials: never in a repr that may reach a log
    script = model.fetch_script(str(tmp_path / "dest"))
    curls = [ln.rpartition("| ")[2] for ln in script.splitlines() if "curl " in ln]
    assert curls and all(c.endswith("-K -") and "X-Amz-" not in c for c in curls)  # no URL on curl's argv
    proc = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for path, sha in want.items():
        assert hashlib.sha256((tmp_path / "dest" / path).read_bytes()).hexdigest() == sha
    assert (tmp_path / "dest" / "inferry-manifest.json").is_file()


def test_tampered_or_expired_url_is_refused(pushed, tmp_path):
    st, _ = pushed
    url = presign_model(st, "models/llama", 600).files[0].url
    tampered = url.replace("X-Amz-Expires=600", "X-Amz-Expires=6000")
    assert _curl(tampered, tmp_path / "x").returncode != 0
    with pytest.raises(StorageError, match="out of range"):
        presign_model(st, "models/llama", expires_s=8 * 24 * 3600)
