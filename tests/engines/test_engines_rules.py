"""Validation rules for engine/GPU combinations, as pure functions and through `engine_checks`."""
from __future__ import annotations

import pytest

from infra.engines import checks, rules
from infra.engines.checks import engine_checks
from infra.engines.registry import engine_for
from infra.engines.trtllm.rules import backend_rule
from infra.stack.validate import findings
from tests.conftest import STACKS
from tests.engines.test_engines import BASE, deployment

LLAMA_8B = {"num_layers": 32, "num_attention_heads": 32, "num_kv_heads": 8, "head_dim": 128, "hidden_size": 4096,
            "vocab_size": 128256, "max_context": 131072, "num_params": 8.03e9}


@pytest.mark.parametrize("engine,cc,severity", [
    ("vllm", 9.0, None), ("vllm", 8.9, None), ("vllm", 8.0, "warning"), ("vllm", 7.0, "error"),
    ("tensorrt-llm", 8.0, "error"), ("tensorrt-llm", 9.0, None),
])
def test_fp8_rule(engine, cc, severity):
    found = rules.fp8_rule(engine_for(engine).sizing.fp8_weight_only, True, False, cc)
    assert [p.severity for p in found] == ([severity] if severity else [])


def test_fp8_kv_cache_on_ampere_is_an_error_for_trtllm():
    assert rules.fp8_rule(False, False, True, 8.6)[0].path == "engine.kv_cache_dtype"


@pytest.mark.parametrize("tp,heads,kv,ok", [(1, 32, 8, True), (2, 32, 8, True), (8, 32, 8, True),
                                            (16, 32, 8, True), (3, 32, 8, False), (4, 28, 4, True),
                                            (8, 28, 4, False), (4, 40, 6, False)])
def test_tp_rule(tp, heads, kv, ok):
    assert (rules.tp_rule(tp, heads, kv) == []) is ok


def test_context_rule():
    assert rules.context_rule(131072, 131072) == [] and rules.context_rule(None, 8) == []
    assert "131072" in rules.context_rule(200000, 131072)[0].hint


@pytest.mark.parametrize("version,ok", [("1.2.1", True), ("1.2.0rc2", True), ("1.3.0", False), ("2.0.0", False)])
def test_tensorrt_backend_only_up_to_the_1_2_line(version, ok):
    assert (backend_rule(version, "tensorrt") == []) is ok
    assert backend_rule(version, "pytorch") == []


def test_engine_checks_with_architecture_in_the_stack():
    model = {**BASE["model"], "architecture": LLAMA_8B}
    d = deployment({"kind": "vllm", "tensor_parallel_size": 3, "max_model_len": 262144}, model=model,
                   provider={**BASE["provider"], "gpu_count": 4})
    paths = {p.path for p in engine_checks(d)}
    assert {"engine.tensor_parallel_size", "engine.max_model_len"} <= paths


def test_fp8_warning_through_the_catalog_lookup(monkeypatch):
    monkeypatch.setattr(checks, "gpu_capability", lambda gpu: 8.0)
    found = engine_checks(deployment({"kind": "vllm", "quantization": "fp8"}))
    assert [(p.path, p.severity) for p in found] == [("engine.quantization", "warning")]


def test_extra_args_the_pinned_vllm_lacks_are_errors():
    found = engine_checks(deployment({"kind": "vllm", "extra_args": ["--enable-turbo"]}))
    assert [p.path for p in found] == ["engine.extra_args"] and "--enable-turbo" in found[0].message


def test_trtllm_checks():
    assert [p.path for p in engine_checks(deployment({"kind": "tensorrt-llm", "version": "1.3.0",
                                                      "backend": "tensorrt"}))] == ["engine.backend"]
    found = engine_checks(deployment({"kind": "tensorrt-llm", "extra_options": {"kv_cache_cfg": {}}}))
    assert [p.path for p in found] == ["engine.extra_options"]
    eagle = {"method": "eagle", "num_speculative_tokens": 3, "model": "/opt/eagle"}
    assert engine_checks(deployment({"kind": "tensorrt-llm", "speculative": eagle}))  # Eagle3 only on pytorch
    assert engine_checks(deployment({"kind": "tensorrt-llm", "version": "1.4.0"}))[0].severity == "warning"


@pytest.mark.parametrize("stack_file", STACKS, ids=lambda p: p.stem)
def test_bundled_stacks_have_no_engine_errors(stack_file):
    from infra.stack.stackfile import load_stack

    assert [p for p in findings(load_stack(str(stack_file)).deployment) if p.severity == "error"] == []


def test_trtllm_served_name_is_the_weights_folder_and_validate_says_when_it_is_not_model_name():
    from infra.engines.trtllm import service_spec

    named = deployment({"kind": "tensorrt-llm"})
    assert service_spec(named).served_model_name == named.model.name
    assert not [p for p in engine_checks(named) if p.path == "model.name"]
    other = deployment({"kind": "tensorrt-llm"}, model={**BASE["model"], "weights": "s3://inferry-weights/l8b"})
    assert service_spec(other).served_model_name == "l8b"
    (p,) = [p for p in engine_checks(other) if p.path == "model.name"]
    assert p.severity == "warning" and "lists this model as 'l8b'" in p.message
    built = deployment({"kind": "tensorrt-llm", "backend": "tensorrt"}, model={**BASE["model"], "weights": "s3://inferry-weights/l8b"})
    assert service_spec(built).served_model_name == named.model.name  # the engine's folder is named after it
