"""GPU memory the LoRA adapter slots take (pure): what vLLM and SGLang allocate before the KV cache.

Both engines allocate, at start-up, one A and one B buffer per LoRA-wrapped linear layer for every slot at the
rank limit, whatever rank each adapter has: vLLM's create_lora_weights (vllm/lora/layers/base_linear.py,
column_parallel_linear.py, row_parallel_linear.py; fused_moe.py for experts) for --max-loras slots, SGLang's
LoRAMemoryPool.init_buffers (sglang/srt/lora/mem_pool.py) for --max-loras-per-batch. Under tensor parallelism
a column-parallel layer (qkv, gate_up) keeps A whole and splits B's outputs; a row-parallel one (o, down)
splits A's inputs and keeps B whole. docs/lora.md works one model through.
"""
from __future__ import annotations

from infra.sizing.catalog import ModelArch


def _per_rank_per_layer(a: ModelArch, tp: int) -> int:
    """Elements of A and B per slot, per unit of rank, in one decoder layer on one GPU (attention and MLP)."""
    h, q, kv = a.hidden_size, a.num_attention_heads * a.head_dim, a.num_kv_heads * a.head_dim
    inter = a.intermediate_size or 4 * h  # unknown: the classic 4x MLP
    qkv = 3 * h + -(-(q + 2 * kv) // tp)  # three A slices (q, k, v), B split by output
    o = -(-q // tp) + h
    mlp = 2 * h + -(-2 * inter // tp) + -(-inter // tp) + h  # gate_up (two slices), down
    return qkv + o + mlp * (a.num_experts or 1)  # vLLM's MoE LoRA keeps A and B per expert


def adapter_bytes(a: ModelArch, slots: int, rank: int, dtype_bytes: float, tp: int = 1, pp: int = 1) -> int:
    """Bytes the adapter slots take on one GPU: slots x rank limit x the LoRA shapes of its layers x dtype."""
    if slots <= 0:
        return 0
    layers = -(-a.num_layers // pp)
    return int(slots * rank * layers * _per_rank_per_layer(a, tp) * dtype_bytes)
