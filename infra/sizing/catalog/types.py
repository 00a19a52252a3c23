"""Typed rows of the catalog: a GPU, a model architecture, a provider's price list."""
from __future__ import annotations

from dataclasses import dataclass, field

MIB = 1024**2
GIB = 1024**3


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model as the driver reports it."""

    key: str
    product_names: tuple[str, ...]
    memory_mib: int
    bandwidth_tbps: float
    compute_capability: str
    architecture: str
    fp8: bool
    fp4: bool
    source: str

    @property
    def memory_bytes(self) -> int:
        """Total memory in bytes, as nvidia-smi reports it."""
        return self.memory_mib * MIB

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """Peak memory bandwidth in bytes per second."""
        return self.bandwidth_tbps * 1e12


@dataclass(frozen=True)
class ModelArch:
    """A model's shape: what sizing needs to count weights and KV cache."""

    key: str
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    hidden_size: int
    vocab_size: int
    max_context: int
    num_params: float
    intermediate_size: int | None = None
    num_experts: int | None = None
    num_experts_per_token: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    weights_dtype: str = "bfloat16"
    hf_id: str | None = None
    aliases: tuple[str, ...] = ()
    source: str = ""
    tie_word_embeddings: bool = False

    @property
    def is_mla(self) -> bool:
        """Multi-head latent attention (DeepSeek): one compressed latent per layer in the KV cache."""
        return self.kv_lora_rank is not None


@dataclass(frozen=True)
class ProviderPrices:
    """A provider's on-demand list prices per GPU-hour, by catalog GPU key."""

    key: str
    regions: tuple[str, ...]
    egress_per_gb: float
    prices: dict[str, dict[str, float]] = field(default_factory=dict)
    source: str = ""

    def price(self, gpu: str, kind: str = "vm") -> float | None:
        """USD per GPU-hour for a GPU, or None when the provider does not list it."""
        return self.prices.get(gpu, {}).get(kind)
