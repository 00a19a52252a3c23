#!/usr/bin/env python3
"""Measure weight and KV-cache memory of randomly initialised catalog models on a GPU vs inferry's prediction.

Needs a CUDA GPU, torch and transformers (no weight download: models are built from the catalog's
architecture with random weights). Prints one JSON document: per model, measured vs predicted bytes.

    python scripts/measure_gpu.py [--models llama-3.1-8b qwen2.5-7b] [--tokens 16384] [--out FILE]

What is measured:
- weights: torch.cuda.memory_allocated() after building the model on the GPU in bfloat16, compared with
  infra.sizing.memory.weight_bytes(arch, None) (parameters x 2 bytes);
- KV cache: allocated bytes of a transformers DynamicCache after a prefill of --tokens tokens, divided by
  the tokens, compared with infra.sizing.memory.kv_bytes_per_token(arch, 2) (2 x layers x kv heads x head dim x 2);
- the device: nvidia-smi's total vs the catalog's memory_mib for the matching product name.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from infra.sizing import catalog  # noqa: E402
from infra.sizing.memory import kv_bytes_per_token, weight_bytes  # noqa: E402


def hf_config(arch: catalog.ModelArch):
    """A transformers config with the catalog architecture (Llama/Qwen2/Mistral are Llama-shaped)."""
    from transformers import LlamaConfig, Qwen2Config

    cls = Qwen2Config if arch.key.startswith("qwen") else LlamaConfig
    return cls(hidden_size=arch.hidden_size, intermediate_size=arch.intermediate_size,
               num_hidden_layers=arch.num_layers, num_attention_heads=arch.num_attention_heads,
               num_key_value_heads=arch.num_kv_heads, head_dim=arch.head_dim, vocab_size=arch.vocab_size,
               max_position_embeddings=arch.max_context, tie_word_embeddings=arch.tie_word_embeddings,
               torch_dtype="bfloat16")


def measure(key: str, tokens: int) -> dict:
    """Build one model with random weights on cuda:0 and measure its weights and KV cache."""
    import torch
    from transformers import AutoModelForCausalLM, DynamicCache

    arch = catalog.model(key)
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(hf_config(arch), torch_dtype=torch.bfloat16)
    model.eval()
    weights = torch.cuda.memory_allocated() - base
    cache = DynamicCache()
    ids = torch.randint(0, arch.vocab_size, (1, tokens), device="cuda")
    with torch.no_grad():
        model.model(input_ids=ids, past_key_values=cache, use_cache=True)  # base model: no logits for all tokens
    kv = sum(t.numel() * t.element_size() for layer in _cache_tensors(cache) for t in layer)
    result = {
        "model": key, "params_measured": sum(p.numel() for p in model.parameters()),
        "params_catalog": arch.num_params,
        "weights_bytes_measured": weights, "weights_bytes_predicted": weight_bytes(arch, None),
        "kv_bytes_per_token_measured": kv / tokens, "kv_bytes_per_token_predicted": kv_bytes_per_token(arch, 2),
        "prefill_tokens": tokens,
    }
    del model, cache
    torch.cuda.empty_cache()
    return result


def _cache_tensors(cache) -> list[tuple]:
    """(key, value) tensors per layer across transformers versions."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache))


def device() -> dict:
    """The GPU as nvidia-smi and torch see it, and the catalog row it matches."""
    import torch

    out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,compute_cap", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout.splitlines()[0].split(", ")
    key = catalog.gpu_for_product_name(out[0])
    return {"name": out[0], "memory_mib_smi": int(out[1]), "compute_cap": out[2], "catalog_key": key,
            "memory_mib_catalog": catalog.gpu(key).memory_mib if key else None,
            "torch_total_bytes": torch.cuda.get_device_properties(0).total_memory}


def main() -> None:
    """Measure the chosen models and print measured vs predicted as JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["llama-3.1-8b", "qwen2.5-7b"])
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    doc = {"device": device(), "models": [measure(k, args.tokens) for k in args.models]}
    for m in doc["models"]:
        m["weights_ratio"] = round(m["weights_bytes_measured"] / m["weights_bytes_predicted"], 4)
        m["kv_ratio"] = round(m["kv_bytes_per_token_measured"] / m["kv_bytes_per_token_predicted"], 4)
    text = json.dumps(doc, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
