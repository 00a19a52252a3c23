"""`inferry validate` rejects bad Kubernetes names, labels and quantities; the weight verifier really verifies."""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from infra.targets.kubernetes.weights import TEMPLATES, VERIFY_SCRIPT
from tests.support.kubernetes_stacks import K8S_STACK

ZERO = {"engine": "keda", "min_replicas": 0, "max_replicas": 2, "scale_to_zero": True}
BAD = [
    ({"cache_size": "100GB"}, "target.cache_size", "not a Kubernetes quantity"),
    ({"memory": "64 GB"}, "target.memory", "not a Kubernetes quantity"),
    ({"namespace": "Inference_NS"}, "target.namespace", "Inference_NS"),
    ({"labels": {"team": "ml platform"}}, "target.labels.team", "invalid label value"),
    ({"labels": {"Example.COM/team": "ml"}}, "target.labels.Example.COM/team", "invalid label key"),
    ({"node_selector": {"pool": "-h100"}}, "target.node_selector.pool", "invalid label value"),
    ({"gpu_product": "NVIDIA H100"}, "target.gpu_product", "NVIDIA H100"),
    ({"tolerations": [{"key": "nvidia.com/gpu!"}]}, "target.tolerations[0].key", "invalid taint key"),
    ({"context": None}, "target.context", "ambient"),
    ({"autoscaling": {"engine": "hpa", "min_replicas": 0, "max_replicas": 2}}, "target.autoscaling", "scale_to_zero"),
    ({"autoscaling": {"engine": "hpa", "cooldown_s": 7200}}, "target.autoscaling.cooldown_s", "at most 3600"),
    ({"autoscaling": None, "replicas": 2, "pdb_min_available": 3}, "target.pdb_min_available", "drain"),
    ({"autoscaling": ZERO, "gateway": None}, "target.autoscaling.scale_to_zero", "needs target.gateway"),
    ({"autoscaling": ZERO, "gateway": {"hold_s": 0}}, "target.gateway.hold_s", "503 at once"),
]


def _stack(tmp_path, change: dict) -> str:
    doc = yaml.safe_load(K8S_STACK.read_text())
    target = doc["config"]["inferry:deployment"]["target"]
    for key, value in change.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value
    path = tmp_path / "Pulumi.case.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@pytest.mark.parametrize("change,path,words", BAD, ids=[b[1] for b in BAD])
def test_validate_rejects_with_field_and_reason(cli, tmp_path, change, path, words):
    result = cli("validate", _stack(tmp_path, change))
    assert result.exit_code == 1
    line = next((ln for ln in result.output.splitlines() if f"• {path}" in ln), None)
    assert line is not None, result.output
    assert words in line and "Traceback" not in result.output


def test_the_printed_fix_for_scale_to_zero_without_a_gateway_validates(cli, tmp_path):
    result = cli("validate", _stack(tmp_path, {"autoscaling": ZERO, "gateway": None}))
    hint = next(ln for ln in result.output.splitlines() if "target.autoscaling.scale_to_zero" in ln)
    assert "add `gateway: {hold_s: 300}` under target" in result.output, result.output
    fixed = yaml.safe_load("{hold_s: 300}")  # the text the hint quotes, as YAML
    result = cli("validate", _stack(tmp_path, {"autoscaling": ZERO, "gateway": fixed}))
    assert result.exit_code == 0 and hint not in result.output, result.output


def test_an_ingress_without_the_gateway_is_warned_and_the_printed_fix_clears_it(cli, tmp_path):
    result = cli("validate", _stack(tmp_path, {"ingress": {"host": "llm.example.eu", "tls_secret": "llm-tls"},
                                               "gateway": None}))
    assert result.exit_code == 0, result.output
    line = next((ln for ln in result.output.splitlines() if "target.ingress" in ln), None)
    assert line is not None and "every path it serves is public" in line, result.output
    assert "add `gateway: {}` under target" in result.output
    fixed = yaml.safe_load("{}")  # the text the hint quotes, as YAML
    result = cli("validate", _stack(tmp_path, {"ingress": {"host": "llm.example.eu", "tls_secret": "llm-tls"},
                                               "gateway": fixed}))
    assert result.exit_code == 0 and "target.ingress" not in result.output, result.output


def test_validate_accepts_the_bundled_kubernetes_stack(cli):
    result = cli("validate", str(K8S_STACK))
    assert result.exit_code == 0, result.output


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


def _fetch(s3_server, root, home, build_dir):
    from infra.targets.kubernetes.weights import FETCH_SCRIPT

    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(home), "BUCKET": "weights",
           "PREFIX": "m", "WEIGHTS_DIR": str(root), "AWS_ENDPOINT_URL": s3_server.endpoint,
           "AWS_DEFAULT_REGION": s3_server.region, "AWS_ACCESS_KEY_ID": s3_server.access_key,
           "AWS_SECRET_ACCESS_KEY": s3_server.secret_key, "ADDRESSING_STYLE": "path",
           "MANIFEST": "inferry-manifest.json", "BUILD_PREFIX": "builds/k1", "BUILD_DIR": str(build_dir)}
    return subprocess.run(["sh", str(TEMPLATES / FETCH_SCRIPT)], env=env, capture_output=True, text=True,
                          check=False, timeout=120)


def test_fetch_script_pulls_from_a_real_store_then_verifies_then_skips(s3_server_factory, tmp_path):
    """The init container's script, run for real: aws CLI against rclone's S3 server (its own: rclone caches
    directory listings, so buckets made on disk must exist before the first listing)."""
    s3_server = s3_server_factory()
    store = _model(tmp_path / "store", {"config.json": b"{}", "model.safetensors": b"w" * 70000})
    shutil.copytree(store, s3_server.bucket("weights") / "m", dirs_exist_ok=True)
    (s3_server.bucket("weights") / "builds" / "k1").mkdir(parents=True)
    (s3_server.bucket("weights") / "builds" / "k1" / "rank0.engine").write_bytes(b"e" * 1000)
    cache, home, engine = tmp_path / "cache" / "m", tmp_path / "home", tmp_path / "engine"
    home.mkdir()
    first = _fetch(s3_server, cache, home, engine)
    assert first.returncode == 0, first.stderr
    assert (cache / "model.safetensors").read_bytes() == b"w" * 70000
    assert (engine / "rank0.engine").read_bytes() == b"e" * 1000  # the built TensorRT engine, from the cache
    assert _verify(cache).returncode == 0
    second = _fetch(s3_server, cache, home, engine)
    assert second.returncode == 0 and "nothing to fetch" in second.stdout


def test_upload_script_writes_the_marker_last_and_a_second_run_uploads_nothing(s3_server_factory, tmp_path):
    from infra.targets.kubernetes.build import MARKER
    from infra.targets.kubernetes.weights import UPLOAD_SCRIPT

    s3_server = s3_server_factory()
    s3_server.bucket("weights")
    built = tmp_path / "engine"
    built.mkdir()
    (built / "rank0.engine").write_bytes(b"E" * 3000)
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path), "BUCKET": "weights",
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
