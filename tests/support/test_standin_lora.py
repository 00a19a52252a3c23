"""The stand-in serves adapters as the real engines' serving code does: /v1/models lists the base model and each
adapter with the served model as its parent (vLLM 0.33 OpenAIServingModels.show_available_models, SGLang 0.5.23
http_server.available_models), vLLM answers a chat naming an adapter and refuses an unknown name, and an adapter
folder without adapter_config.json fails the start-up."""
from __future__ import annotations

import json
import subprocess

import pytest

from infra.engines import service_spec
from tests.engines.test_engines_lora import with_adapters
from tests.support.standin.process import command, free_port, start_engine
from tests.support.test_standin_engine import ENV, get, relocated

pytestmark = pytest.mark.lora
KEY = "sk-lora-standin"


@pytest.fixture()
def folders(tmp_path):
    model = tmp_path / "llama"
    model.mkdir()
    (model / "config.json").write_text("{}")
    for name in ("sql-lora", "chat"):
        (tmp_path / "adapters" / name).mkdir(parents=True)
        (tmp_path / "adapters" / name / "adapter_config.json").write_text(json.dumps({"r": 16}))
    return tmp_path


def test_vllm_lists_both_adapters_and_answers_a_chat_naming_one(folders):
    d = with_adapters({"kind": "vllm"})
    spec = service_spec(d, str(folders / "llama"), models_dir=str(folders))
    eng = start_engine(["serve", *relocated(spec.args, "127.0.0.1", free_port())], folders / "log",
                       env={"VLLM_API_KEY": KEY})
    try:
        status, body = get(f"{eng.base_url}/v1/models", KEY)
        cards = {c["id"]: c for c in json.loads(body)["data"]}
        assert status == 200 and list(cards) == [d.model.name, "sql", "chat"]
        assert cards["sql"]["parent"] == d.model.name and cards["sql"]["root"] == str(folders / "adapters/sql-lora")
        assert cards[d.model.name]["parent"] is None
        import openai

        client = openai.OpenAI(base_url=f"{eng.base_url}/v1", api_key=KEY)
        r = client.chat.completions.create(model="chat", messages=[{"role": "user", "content": "hi"}], max_tokens=3)
        assert r.model == "chat"
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "hi"}])
    finally:
        eng.stop()


def test_sglang_lists_the_adapters_under_the_served_model(folders):
    d = with_adapters({"kind": "sglang"})
    spec = service_spec(d, str(folders / "llama"), models_dir=str(folders))
    port = free_port()
    eng = start_engine(relocated(spec.args, "127.0.0.1", port), folders / "log", program="sglang.launch_server")
    try:
        cards = json.loads(get(f"{eng.base_url}/v1/models")[1])["data"]
        assert [(c["id"], c["parent"], c["root"]) for c in cards] == [
            (d.model.name, None, d.model.name), ("sql", d.model.name, str(folders / "adapters/sql-lora")),
            ("chat", d.model.name, str(folders / "adapters/chat"))]
    finally:
        eng.stop()


def test_an_adapter_folder_without_its_config_fails_the_start(folders):
    (folders / "adapters" / "chat" / "adapter_config.json").unlink()
    spec = service_spec(with_adapters({"kind": "vllm"}), str(folders / "llama"), models_dir=str(folders))
    r = subprocess.run(command("vllm", "serve", *spec.args), capture_output=True, text=True, env=ENV, timeout=60)
    assert r.returncode == 1 and "chat" in r.stderr and "No adapter found" in r.stderr
