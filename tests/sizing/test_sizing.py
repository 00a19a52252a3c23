"""Sizing checked against published figures: docs/facts.md's KV table and vLLM's logged memory breakdowns."""
from __future__ import annotations

import pytest

from infra.sizing import catalog
from infra.sizing.catalog import GIB
from infra.sizing.modelinfo import estimate_params
from infra.sizing.memory import (
    SizingInput, budget, kv_bytes_per_token, max_fitting_context, size, weight_bytes, with_changes,
)

H100 = catalog.gpu("H100-80GB")


@pytest.mark.parametrize("model,fp16_kib,fp8_kib", [
    # docs/sizing.md, "KV cache": 2 x layers x kv_heads x head_dim x bytes
    ("llama-3.1-8b", 128, 64), ("mistral-7b", 128, 64), ("llama-3.1-70b", 320, 160),
    ("qwen2.5-72b", 320, 160), ("llama-3.1-405b", 504, 252), ("qwen2.5-7b", 56, 28),
])
def test_kv_bytes_per_token_match_facts_table_exactly(model, fp16_kib, fp8_kib):
    arch = catalog.model(model)
    assert kv_bytes_per_token(arch, 2) == fp16_kib * 1024
    assert kv_bytes_per_token(arch, 1) == fp8_kib * 1024


def test_kv_under_tensor_parallelism_and_mla():
    a70 = catalog.model("llama-3.1-70b")
    assert kv_bytes_per_token(a70, 2, tp=2) == 160 * 1024
    assert kv_bytes_per_token(a70, 2, tp=16) == kv_bytes_per_token(a70, 2, tp=8)  # at least one head per GPU
    assert kv_bytes_per_token(a70, 2, pp=2) == 160 * 1024  # half the layers per stage
    ds = catalog.model("deepseek-v3")
    # MLA: one latent of kv_lora_rank + rope dims per layer, no factor 2, replicated across TP ranks.
    assert kv_bytes_per_token(ds, 2) == 61 * (512 + 64) * 2
    assert kv_bytes_per_token(ds, 2, tp=8) == kv_bytes_per_token(ds, 2)


def _within(pred: float, measured: float, tol: float = 0.05) -> bool:
    return abs(pred - measured) <= tol * measured


def test_budget_reproduces_facts_h100_breakdown():
    # docs/facts.md: vLLM, 8B model, H100 80 GB, 0.9: 71.27 GiB = 12.55 weights + 2.38 act + 0.16 non-torch + 56.18 KV.
    inp = SizingInput(catalog.model("llama-3.1-8b"), H100, weights_bytes=int(12.55 * GIB), max_model_len=8192)
    b = budget(inp)
    assert _within(b.usable / GIB, 71.27, 0.01)
    assert _within(b.kv / GIB, 56.18)


@pytest.mark.parametrize("tp,measured_kv,weights_gib", [(1, 53.29, 14.96), (2, 71.29 - 7.48 - 3.58 - 1.26, 7.48)])
def test_budget_reproduces_vllm_pr_10511_logs(tp, measured_kv, weights_gib):
    # github.com/vllm-project/vllm/pull/10511 (2024-12-13): `vllm serve meta-llama/Meta-Llama-3-8B` on H100,
    # total 79.22 GiB, utilization 0.9; TP=1: weights 14.96, non-torch 1.79, activations 1.26, KV 53.29 GiB;
    # TP=2: weights 7.48, non-torch 3.58, activations 1.26 GiB per GPU.
    arch = catalog.model("llama-3-8b")
    w = weight_bytes(arch, None)
    assert _within(w / tp / GIB, weights_gib, 0.01)  # weights from the parameter count
    b = budget(SizingInput(arch, H100, weights_bytes=w, max_model_len=8192, tp=tp))
    assert _within(b.kv / GIB, measured_kv)


def test_fp8_keeps_embeddings_16bit():
    arch = catalog.model("llama-3.1-8b")
    bf16, fp8 = weight_bytes(arch, None), weight_bytes(arch, "fp8")
    embed = 2 * arch.vocab_size * arch.hidden_size
    assert fp8 == int(arch.num_params - embed + 2 * embed)
    assert 0.5 < fp8 / bf16 < 0.6
    assert weight_bytes(arch, "awq") < fp8


@pytest.mark.parametrize("key", ["llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "qwen2.5-7b", "qwen2.5-72b",
                                 "mistral-7b", "mixtral-8x7b"])
def test_parameter_count_from_architecture_matches_model_card(key):
    arch = catalog.model(key)
    assert _within(estimate_params(arch), arch.num_params, 0.02)


def _inp(model="llama-3.1-8b", gpu="H100-80GB", ctx=32768, **kw):
    arch = catalog.model(model)
    return SizingInput(arch, catalog.gpu(gpu), weight_bytes(arch, kw.pop("quant", None)), ctx, **kw)


def test_refusals_say_why():
    assert "maximum context" in size(_inp("qwen2.5-7b", ctx=131072)).reason
    assert "does not divide" in size(_inp("qwen2.5-7b", tp=8)).reason
    assert "exceed" in size(_inp("llama-3.1-70b")).reason
    v = size(_inp("llama-3.1-70b", gpu="B200", ctx=131072))
    assert not v.fits and "KV cache holds" in v.reason
    assert "FP8" in size(_inp(gpu="A100-80GB", engine="tensorrt-llm", fp8_compute=True)).reason
    assert size(_inp(gpu="H100-80GB", engine="tensorrt-llm", fp8_compute=True)).fits


def test_capacity_is_whole_blocks_and_concurrency_follows():
    v = size(_inp(block_size=16))
    assert v.kv_capacity_tokens % 16 == 0 and v.fits
    assert v.max_concurrency == round(v.kv_capacity_tokens / 32768, 2)
    assert v.headroom_bytes == v.budget.kv - 32768 * v.kv_bytes_per_token_per_gpu


def test_trtllm_fraction_applies_to_free_memory():
    vllm, trt = budget(_inp(memory_fraction=0.9)), budget(_inp(engine="tensorrt-llm", kv_share_of="free", memory_fraction=0.9))
    assert trt.kv > vllm.kv  # 0.9 of what is left after weights, not of the whole GPU


def test_max_fitting_context_is_the_boundary():
    inp = _inp("llama-3.1-70b", ctx=131072, gpu="B200")
    ctx = max_fitting_context(inp)
    assert ctx > 0 and size(with_changes(inp, max_model_len=ctx)).fits
    assert not size(with_changes(inp, max_model_len=ctx + 1024)).fits
