"""The stand-in answers as SGLang does: its command line (snapshot-checked, --config merged), /health,
/v1/models, 401 without the key on every guarded path, its metric names."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tests.support.standin.argv import Refused, parse
from tests.support.standin.process import free_port, start_engine


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
                           "--port", str(port), "--context-length", "32k", "--config", str(config)],
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
