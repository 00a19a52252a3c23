"""Each adapter's adapter_config.json read from the store before anything is deployed: missing, not JSON, not
LoRA, a rank other than the stack's, a base model other than the one served: each a clear error naming it."""
from __future__ import annotations

import json

import pytest

from infra.sizing.adapters import adapter_store_problems
from tests.engines.test_engines_lora import with_adapters

pytestmark = pytest.mark.lora

GOOD = {"peft_type": "LORA", "r": 16, "base_model_name_or_path": "meta-llama/Llama-3.1-8B-Instruct",
        "target_modules": ["q_proj", "v_proj"]}


def reader(files: dict[str, bytes]):
    """Reads `prefix/name` from files (what infra/storage/remote.adapter_readers does against a store)."""
    return lambda prefix: (lambda name: files.get(f"{prefix}/{name}"))


def found(sql: bytes | None, chat: bytes | None = json.dumps({**GOOD, "r": 4}).encode()):
    files = {k: v for k, v in {"adapters/sql-lora/adapter_config.json": sql,
                               "adapters/chat/adapter_config.json": chat}.items() if v is not None}
    return [(p.path, p.message, p.hint) for p in adapter_store_problems(with_adapters({"kind": "vllm"}),
                                                                         reader(files))]


def test_adapters_trained_on_the_served_model_pass():
    assert found(json.dumps(GOOD).encode()) == []
    # a local training path ending in the model's name is the same base
    assert found(json.dumps({**GOOD, "base_model_name_or_path": "/data/llama-3.1-8b-instruct/"}).encode()) == []


@pytest.mark.parametrize("raw, where, words", [
    (None, "model.adapters[0].weights", "adapter_config.json is not in the store"),
    (b"{not json", "model.adapters[0].weights", "not a JSON object"),
    (b"[1]" * 400_000, "model.adapters[0].weights", "not a JSON object"),
    (json.dumps({**GOOD, "peft_type": "IA3"}).encode(), "model.adapters[0]", "not LoRA"),
    (json.dumps({**GOOD, "r": 8}).encode(), "model.adapters[0].rank", "rank 8 in its adapter_config.json"),
    (json.dumps({**GOOD, "r": "16"}).encode(), "model.adapters[0]", "has no rank"),
    (json.dumps({**GOOD, "base_model_name_or_path": "Qwen/Qwen2.5-7B-Instruct"}).encode(), "model.adapters[0]",
     "trained on 'Qwen/Qwen2.5-7B-Instruct', but the model served is 'llama-3.1-8b-instruct'"),
])
def test_each_wrong_adapter_is_named_with_what_is_wrong(raw, where, words):
    (problem,) = found(raw)
    assert problem[0] == where and words in problem[1], problem
    assert "'sql'" in problem[1] or "sql-lora" in problem[1]


def test_the_printed_fix_for_a_wrong_rank_is_the_rank_the_store_has():
    (problem,) = found(json.dumps({**GOOD, "r": 8}).encode())
    assert problem[2] == "set model.adapters[0].rank: 8"
