"""The pods' weight scripts run for real (templates/kubernetes: fetch-weights.sh and store.sh with s5cmd, with
BusyBox's applets, or with the aws CLI; verify-weights.py; upload-engine.sh) against real S3 servers: they
fetch, verify, refuse what leaves the folder or does not match, and heal on the pod's restart."""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import time

import pytest

from infra.targets.kubernetes.weights import TEMPLATES, VERIFY_SCRIPT
from tests.support.servers.hostile_s3 import HostileStore
from tests.support.servers.s3 import client_path


def _model(tmp_path, files: dict[str, bytes]) -> tuple:
    root = tmp_path / "models" / "m"
    root.mkdir(parents=True)
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    entries = [{"path": n, "size": len(b), "sha256": hashlib.sha256(b).hexdigest()} for n, b in files.items()]
    (root / "inferry-manifest.json").write_text(json.dumps({"version": 1, "files": entries}))
    return root


def _verify(root):
    env = {"WEIGHTS_DIR": str(root), "MANIFEST": "inferry-manifest.json"}
    return subprocess.run([sys.executable, str(TEMPLATES / VERIFY_SCRIPT)], env=env,
                          capture_output=True, text=True, check=False)


def test_verify_script_accepts_good_weights_then_skips(tmp_path):
    root = _model(tmp_path, {"config.json": b"{}", "shards/model-00001.safetensors": b"x" * 5000})
    first = _verify(root)
    assert first.returncode == 0 and "2 files match" in first.stdout
    assert (root / ".verified").read_text() == hashlib.sha256((root / "inferry-manifest.json").read_bytes()).hexdigest()
    assert "verified earlier" in _verify(root).stdout


@pytest.mark.parametrize("damage", ["flip", "truncate", "delete"])
def test_verify_script_rejects_damaged_weights(tmp_path, damage):
    root = _model(tmp_path, {"config.json": b"{}", "model.safetensors": b"y" * 4096})
    target = root / "model.safetensors"
    if damage == "flip":
        target.write_bytes(b"z" + b"y" * 4095)
    elif damage == "truncate":
        target.write_bytes(b"y" * 10)
    else:
        target.unlink()
    result = _verify(root)
    assert result.returncode == 1 and "model.safetensors" in result.stderr
    assert not (root / ".verified").exists()


@pytest.mark.parametrize("path", ["../secret", "/etc/passwd", "a\n../secret", "x\x1b[2J", ".verified", "a//b"])
def test_verify_script_refuses_paths_outside_the_model(tmp_path, path):
    root = _model(tmp_path, {"config.json": b"{}"})
    (tmp_path / "models" / "secret").write_bytes(b"s")
    doc = json.loads((root / "inferry-manifest.json").read_text())
    doc["files"].append({"path": path, "size": 1, "sha256": hashlib.sha256(b"s").hexdigest()})
    (root / "inferry-manifest.json").write_text(json.dumps(doc))
    result = _verify(root)
    assert result.returncode == 1 and f"{ascii(path)}: refused: the path leaves the model folder" in result.stderr
    assert not (root / ".verified").exists()


def test_verify_script_refuses_a_digest_that_is_not_a_sha256(tmp_path):
    root = _model(tmp_path, {"config.json": b"{}"})
    doc = json.loads((root / "inferry-manifest.json").read_text())
    doc["files"][0]["sha256"] = doc["files"][0]["sha256"].upper()
    (root / "inferry-manifest.json").write_text(json.dumps(doc))
    result = _verify(root)
    assert result.returncode == 1 and "64 lowercase hex digits" in result.stderr


def _fetch(s3_server, root, home, build_dir, tool):
    from infra.targets.kubernetes.weights import FETCH_SCRIPT

    env = {"PATH": client_path(home.parent / "bin", tool), "HOME": str(home), "BUCKET": "weights",
           "PREFIX": "m", "WEIGHTS_DIR": str(root), "AWS_ENDPOINT_URL": s3_server.endpoint,
           "AWS_DEFAULT_REGION": s3_server.region, "AWS_ACCESS_KEY_ID": s3_server.access_key,
           "AWS_SECRET_ACCESS_KEY": s3_server.secret_key, "ADDRESSING_STYLE": "path",
           "MANIFEST": "inferry-manifest.json", "BUILD_PREFIX": "builds/k1", "BUILD_DIR": str(build_dir)}
    return subprocess.run(["sh", str(TEMPLATES / FETCH_SCRIPT)], env=env, capture_output=True, text=True,
                          check=False, timeout=120)


@pytest.mark.parametrize("tool", ["s5cmd-busybox", "s5cmd", "aws"])
def test_fetch_script_pulls_from_a_real_store_then_verifies_then_skips(s3_server_factory, tmp_path, tool):
    """The init container's script, run for real: s5cmd or the aws CLI against rclone's S3 server (its own: rclone caches
    directory listings, so buckets made on disk must exist before the first listing)."""
    s3_server = s3_server_factory()
    store = _model(tmp_path / "store", {"config.json": b"{}", "model.safetensors": b"w" * 70000})
    shutil.copytree(store, s3_server.bucket("weights") / "m", dirs_exist_ok=True)
    (s3_server.bucket("weights") / "builds" / "k1").mkdir(parents=True)
    (s3_server.bucket("weights") / "builds" / "k1" / "rank0.engine").write_bytes(b"e" * 1000)
    cache, home, engine = tmp_path / "cache" / "m", tmp_path / "home", tmp_path / "engine"
    home.mkdir()
    t0 = time.perf_counter()
    first = _fetch(s3_server, cache, home, engine, tool)
    wall = time.perf_counter() - t0
    assert first.returncode == 0, first.stderr
    assert (cache / "model.safetensors").read_bytes() == b"w" * 70000
    # The log line says how long the fetch took, to the hundredth (what bench/coldstart.py reads): no longer than
    # the whole script ran, as this process timed it.
    took = re.search(r"weights: fetched s3://weights/m for manifest [0-9a-f]{64} in (\d+\.\d\d) s$", first.stdout, re.M)
    assert took is not None and 0 <= float(took.group(1)) <= wall + 0.01, (first.stdout, wall)
    assert (engine / "rank0.engine").read_bytes() == b"e" * 1000  # the built TensorRT engine, from the cache
    assert _verify(cache).returncode == 0
    second = _fetch(s3_server, cache, home, engine, tool)
    assert second.returncode == 0 and "nothing to fetch" in second.stdout


@pytest.mark.parametrize("tool", ["s5cmd-busybox", "s5cmd", "aws"])
def test_a_file_that_fails_its_check_is_fetched_again_by_the_pods_restart(s3_server_factory, tmp_path, tool):
    # Damaged after the copy (same size, newer than the store's object): the sync alone would skip it on every
    # restart, and the pod would fail its check for ever. Verify removes what did not match; the restart fetches it.
    s3_server = s3_server_factory()
    store = _model(tmp_path / "store", {"config.json": b"{}", "model.safetensors": b"w" * 70000})
    shutil.copytree(store, s3_server.bucket("weights") / "m", dirs_exist_ok=True)
    cache, home, engine = tmp_path / "cache" / "m", tmp_path / "home", tmp_path / "engine"
    home.mkdir()
    assert _fetch(s3_server, cache, home, engine, tool).returncode == 0
    (cache / "model.safetensors").write_bytes(b"v" + b"w" * 69999)
    failed = _verify(cache)
    assert failed.returncode == 1 and "model.safetensors: sha256 differs" in failed.stderr, failed.stderr
    again = _fetch(s3_server, cache, home, engine, tool)
    assert again.returncode == 0, again.stderr
    assert (cache / "model.safetensors").read_bytes() == b"w" * 70000
    assert _verify(cache).returncode == 0


@pytest.mark.parametrize("tool", ["s5cmd-busybox", "s5cmd", "aws"])
def test_upload_script_writes_the_marker_last_and_a_second_run_uploads_nothing(s3_server_factory, tmp_path, tool):
    from infra.targets.kubernetes.build import MARKER
    from infra.targets.kubernetes.weights import UPLOAD_SCRIPT

    s3_server = s3_server_factory()
    s3_server.bucket("weights")
    built = tmp_path / "engine"
    built.mkdir()
    (built / "rank0.engine").write_bytes(b"E" * 3000)
    env = {"PATH": client_path(tmp_path / "bin", tool), "HOME": str(tmp_path), "BUCKET": "weights",
           "BUILD_PREFIX": "builds/k2", "BUILD_DIR": str(built), "AWS_ENDPOINT_URL": s3_server.endpoint,
           "AWS_DEFAULT_REGION": s3_server.region, "AWS_ACCESS_KEY_ID": s3_server.access_key,
           "AWS_SECRET_ACCESS_KEY": s3_server.secret_key}
    run = lambda: subprocess.run(["sh", str(TEMPLATES / UPLOAD_SCRIPT)], env=env, capture_output=True,  # noqa: E731
                                 text=True, check=False, timeout=120)
    first = run()
    assert first.returncode == 0, first.stderr
    stored = s3_server.root / "weights" / "builds" / "k2"
    assert (stored / "rank0.engine").read_bytes() == b"E" * 3000 and (stored / MARKER).is_file()
    second = run()
    assert second.returncode == 0 and "already complete" in second.stdout


@pytest.mark.parametrize("tool", ["s5cmd-busybox", "s5cmd", "aws"])
def test_fetch_script_writes_no_key_of_a_hostile_store_outside_the_model_folder(tmp_path, tool):
    """S3 keys are any string: whoever can write the bucket can store m/../../escape. s5cmd would write it two folders
    above the model (the aws CLI skips it): the script asks for no such key, and nothing lands outside."""
    from infra.targets.kubernetes.weights import FETCH_SCRIPT

    config = b"{}"
    manifest = json.dumps({"files": [{"path": "config.json", "size": 2,
                                      "sha256": hashlib.sha256(config).hexdigest()}]}).encode()
    objects = {"m/inferry-manifest.json": manifest, "m/config.json": config, "m/../../escape": b"planted",
               "m/sub/../../../escape2": b"planted", "m/x..y": b"kept out too"}
    root = tmp_path / "a" / "b" / "models" / "m"
    with HostileStore("weights", objects) as store:
        env = {"PATH": client_path(tmp_path / "bin", tool), "HOME": str(tmp_path), "BUCKET": "weights",
               "PREFIX": "m", "WEIGHTS_DIR": str(root), "AWS_ENDPOINT_URL": store.endpoint,
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "k",
               "AWS_SECRET_ACCESS_KEY": "s", "ADDRESSING_STYLE": "path", "MANIFEST": "inferry-manifest.json"}
        r = subprocess.run(["sh", str(TEMPLATES / FETCH_SCRIPT)], env=env, capture_output=True, text=True,
                           check=False, timeout=120)
    assert not list(tmp_path.rglob("escape*")), r.stdout + r.stderr
    assert not [k for k in store.asked if ".." in k.split("/")], store.asked  # as the store saw it
    if tool.startswith("s5cmd"):  # the planted keys are not fetched (nor any other holding '..'); the model is whole
        assert r.returncode == 0 and "m/x..y" not in store.asked, r.stderr
        assert _verify(root).returncode == 0
    else:  # the aws CLI skips them with a warning and exits 2: the pod does not start
        assert r.returncode == 2 and "File references a parent directory" in r.stderr


@pytest.mark.parametrize(("tools", "style", "prefix", "expect"), [
    (["s5cmd", "aws"], "path", "m", "s5cmd"),
    (["s5cmd", "aws"], "virtual", "m", "aws"),
    (["s5cmd", "aws"], "path", "models/*/m", "aws"),
    (["s5cmd"], "virtual", "m", "storage.addressing_style: virtual"),
    (["s5cmd"], "path", "m?", "'*' or '?' in the key prefix"),
    ([], "path", "m", "has neither s5cmd nor the aws CLI"),
])
def test_the_store_client_is_s5cmd_where_it_can_address_the_store(tmp_path, tools, style, prefix, expect):
    """s5cmd addresses a custom endpoint path-style only and reads '*' and '?' as wildcards: those stores take the
    aws CLI, and an image without it is refused, naming the field to change."""
    from infra.targets.kubernetes.weights import STORE_SCRIPT

    path = "/usr/bin:/bin"
    for tool in tools:
        path = client_path(tmp_path / "bin", tool)
    env = {"PATH": path, "HOME": str(tmp_path), "ADDRESSING_STYLE": style, "PREFIX": prefix}
    r = subprocess.run(["sh", "-c", '. "$0"; echo "client: ${S5CMD:-aws}"', str(TEMPLATES / STORE_SCRIPT)],
                       env=env, capture_output=True, text=True, check=False, timeout=30)
    if expect in ("s5cmd", "aws"):
        assert r.returncode == 0 and r.stdout.strip().startswith("client: ") and expect in r.stdout.split("/")[-1]
    else:
        assert r.returncode == 2 and expect in r.stderr and "\n" not in r.stderr.strip() and not r.stdout


@pytest.mark.parametrize("tool", ["s5cmd-busybox", "s5cmd", "aws"])
def test_a_prefix_fetch_the_store_refuses_fails_and_an_empty_one_is_nothing_to_do(s3_server_factory, tmp_path, tool):
    """s5cmd's sync exits 0 when its listing is refused: the script fails on what it printed, naming the store's
    answer. A prefix that holds nothing (the build cache before the first engine build) fetches nothing, quietly,
    as the aws CLI's sync does."""
    from infra.targets.kubernetes.weights import STORE_SCRIPT

    s3_server = s3_server_factory()
    (s3_server.bucket("weights") / "m").mkdir()
    (s3_server.bucket("weights") / "m" / "config.json").write_bytes(b"{}")
    env = {"PATH": client_path(tmp_path / "bin", tool), "HOME": str(tmp_path), "ADDRESSING_STYLE": "path",
           "AWS_ENDPOINT_URL": s3_server.endpoint, "AWS_REGION": s3_server.region,
           "AWS_DEFAULT_REGION": s3_server.region, "AWS_ACCESS_KEY_ID": s3_server.access_key}

    def get_tree(prefix: str, secret: str) -> subprocess.CompletedProcess:
        return subprocess.run(["sh", "-c", '. "$0"; get_tree "$1" "$2"', str(TEMPLATES / STORE_SCRIPT),
                               f"s3://weights/{prefix}", str(tmp_path / prefix)],
                              env={**env, "AWS_SECRET_ACCESS_KEY": secret}, capture_output=True, text=True,
                              check=False, timeout=60)

    refused = get_tree("m", "not-the-secret")
    assert refused.returncode != 0 and "SignatureDoesNotMatch" in refused.stderr, refused.stderr
    assert not (tmp_path / "m" / "config.json").exists()
    empty = get_tree("builds/none", s3_server.secret_key)
    assert empty.returncode == 0 and not empty.stderr, empty.stderr
    fetched = get_tree("m", s3_server.secret_key)
    assert fetched.returncode == 0 and (tmp_path / "m" / "config.json").read_bytes() == b"{}", fetched.stderr
