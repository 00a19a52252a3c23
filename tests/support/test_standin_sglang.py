"""The stand-in answers as SGLang does: its command line (snapshot-checked, --config merged by SGLang's own
merger), /health, /v1/models, 401 without the key on every guarded path, /metrics only with --enable-metrics
and under its names; and the launch wrapper inferry renders starts it."""
from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request

import sys
from pathlib import Path

import pytest

from tests.support.standin.argv import Refused, parse
from infra.engines import service_spec
from infra.engines.sglang.service import KEY_ENV
from tests.engines.test_engines import BASE, deployment
from tests.support.standin.process import RunningEngine, free_port, start_engine


def _get(url: str, key: str | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_a_misspelt_flag_is_refused_with_a_did_you_mean():
    with pytest.raises(Refused, match="did you mean --mem-fraction-static"):
        parse("sglang.launch_server", ["--model-path", "/m", "--mem-frac-static", "0.8"])


def test_serves_as_sglang_with_the_key_from_its_config_file(tmp_path):
    model = tmp_path / "llama"
    model.mkdir()
    (model / "config.json").write_text("{}")
    config = tmp_path / "auth.yaml"
    config.write_text("api-key: 's3cr''et'\n")
    port = free_port()
    engine = start_engine(["--model-path", str(model), "--served-model-name", "llama", "--host", "127.0.0.1",
                           "--port", str(port), "--context-length", "32k", "--enable-metrics", "--config", str(config)],
                          tmp_path / "log", program="sglang.launch_server")
    try:
        base = engine.base_url
        assert _get(f"{base}/v1/models")[0] == 401
        assert json.loads(_get(f"{base}/get_model_info")[1]) == {"error": "Unauthorized"}
        status, body = _get(f"{base}/v1/models", "s3cr'et")
        assert status == 200 and json.loads(body)["data"][0]["id"] == "llama"
        assert json.loads(body)["data"][0]["owned_by"] == "sglang"
        status, metrics = _get(f"{base}/metrics")
        assert status == 200 and b"sglang:num_queue_reqs" in metrics and b"vllm:" not in metrics
        assert "SGLang API server version 0.5.23" in engine.log
    finally:
        engine.stop()


def _model(tmp_path):
    model = tmp_path / "llama"
    model.mkdir()
    (model / "config.json").write_text("{}")
    return model


@pytest.mark.parametrize("name", ["auth.XXXXXXXX", "auth.json", "auth"])
def test_a_config_file_not_named_yaml_is_refused_as_sglang_refuses_it(tmp_path, name):
    # server_args_config_parser.py _validate_yaml_file, run from the pinned wheel: what broke every start.
    config = tmp_path / name
    config.write_text("api-key: k\n")
    with pytest.raises(Refused, match="Config file must be YAML format") as e:
        parse("sglang.launch_server", ["--model-path", str(_model(tmp_path)), "--config", str(config)])
    assert e.value.code == 1


def test_a_key_beginning_with_a_dash_is_read_as_an_option_as_sglang_reads_it(tmp_path):
    # SGLang's merger turns `api-key: -k...` into `--api-key -k...`; its argparse takes `-k...` for an option:
    # why validate refuses such a key (infra.stack.secrets.api_key_problem).
    config = tmp_path / "auth.yaml"
    config.write_text("api-key: '-kXq9'\n")
    with pytest.raises(Refused, match="expected one argument"):
        parse("sglang.launch_server", ["--model-path", str(_model(tmp_path)), "--config", str(config)])


def test_metrics_only_with_enable_metrics(tmp_path):
    port = free_port()
    engine = start_engine(["--model-path", str(_model(tmp_path)), "--host", "127.0.0.1", "--port", str(port)],
                          tmp_path / "log", program="sglang.launch_server")
    try:
        assert _get(f"{engine.base_url}/metrics")[0] == 404
    finally:
        engine.stop()


def test_the_rendered_launch_wrapper_starts_sglang_with_the_key_and_metrics(tmp_path):
    """The command inferry renders, run by sh as the container runs it, with python3 on PATH handing
    `-m sglang.launch_server` to the stand-in (as the test hosts' image does)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    engine_py = os.path.join(os.path.dirname(__file__), "standin", "engine.py")
    shim = bin_dir / "python3"
    shim.write_text(f'#!/bin/sh\nif [ "$1 $2" = "-m sglang.launch_server" ]; then shift 2\n'
                    f'exec {os.path.realpath(sys.executable)} {engine_py} sglang.launch_server "$@"; fi\n'
                    f'exec {os.path.realpath(sys.executable)} "$@"\n')
    shim.chmod(0o755)
    port = free_port()
    spec = service_spec(deployment({"kind": "sglang", "max_model_len": 4096}, serving={**BASE["serving"], "port": port}))
    args = [a if a != spec.model_dir else str(_model(tmp_path)) for a in spec.args]
    args[args.index("--host") + 1] = "127.0.0.1"
    key = "k'ey \"with$ quotes"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", KEY_ENV: key, "TMPDIR": str(tmp_path),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with open(tmp_path / "log", "wb") as log:
        proc = subprocess.Popen([*spec.command, *args], stdout=log, stderr=subprocess.STDOUT, env=env)
    engine = RunningEngine(proc, f"http://127.0.0.1:{port}", tmp_path / "log")
    try:
        engine.wait(200)
        assert _get(f"{engine.base_url}/v1/models")[0] == 401
        assert _get(f"{engine.base_url}/v1/models", key)[0] == 200
        status, metrics = _get(f"{engine.base_url}/metrics")
        assert status == 200 and b"sglang:num_running_reqs" in metrics
        # The key went through a named pipe: no file on disk holds it, and its folder is gone once SGLang read it.
        assert [p for p in tmp_path.iterdir() if p.name.startswith("tmp.")] == []
        assert not [f for f in tmp_path.rglob("*") if f.is_file() and key.encode() in f.read_bytes()]
        assert key not in " ".join(open(f"/proc/{proc.pid}/cmdline").read().split("\0"))
        _until(lambda: not _children(proc.pid), "the pipe's writer and watcher exit")
    finally:
        engine.stop()


def _children(pid: int) -> list[str]:
    """The live processes whose parent is pid."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":  # an exited child the engine never reaps holds nothing
            found.append(stat.parent.name)
    return found


def _until(predicate, what: str, timeout: float = 5.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.1)
