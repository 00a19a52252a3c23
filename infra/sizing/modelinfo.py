"""Where a model's architecture and weight size come from: config.json, the catalog, or the stack."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from infra.sizing.catalog import ModelArch, find_model, model, models
from infra.stack.config import Deployment
from infra.errors import SizingError, StorageError
from infra.sizing.memory import DTYPE_BYTES, weight_bytes

# Reads one file of the model folder by name; None when it is not there.
Reader = Callable[[str], bytes | None]
CONFIG = "config.json"
INDEX = "model.safetensors.index.json"


@dataclass(frozen=True)
class ModelInfo:
    """A model's architecture and checkpoint size, with where each came from."""

    arch: ModelArch
    arch_source: str
    checkpoint_bytes: int | None = None  # safetensors index total_size
    prequantized: bool = False


def local_reader(folder: Path) -> Reader:
    """Read files from a local weights folder."""
    def read(name: str) -> bytes | None:
        p = folder / name
        return p.read_bytes() if p.is_file() else None
    return read


def s3_reader(client: Any, bucket: str, prefix: str) -> Reader:
    """Read files of a model folder in an S3-compatible store (a boto3 client)."""
    from botocore.exceptions import BotoCoreError, ClientError

    def read(name: str) -> bytes | None:
        key = f"{prefix.rstrip('/')}/{name}"
        try:
            return client.get_object(Bucket=bucket, Key=key)["Body"].read()
        except client.exceptions.NoSuchKey:
            return None
        except (BotoCoreError, ClientError) as e:
            raise StorageError(f"could not read s3://{bucket}/{key}: {e}",
                               "check storage.endpoint and the store's keys, or plan without --from-store",
                               where="storage") from None
    return read


def estimate_params(a: ModelArch) -> float:
    """Parameters from the architecture: embeddings + attention + (expert) MLPs per layer."""
    h, q, kv = a.hidden_size, a.num_attention_heads * a.head_dim, a.num_kv_heads * a.head_dim
    attn = h * q + 2 * h * kv + q * h
    experts = a.num_experts or 1
    mlp = 3 * h * (a.intermediate_size or 4 * h) * experts + (h * experts if a.num_experts else 0)
    embed = a.vocab_size * h * (1 if a.tie_word_embeddings else 2)
    return float(embed + a.num_layers * (attn + mlp))


# config.json fields sizing divides by or multiplies with: whole numbers above 0 when present.
POSITIVE = ("num_attention_heads", "num_hidden_layers", "hidden_size", "vocab_size", "num_key_value_heads",
            "head_dim", "max_position_embeddings", "intermediate_size")


def _check_numbers(c: dict[str, Any]) -> None:
    """ValueError naming the first required field that is missing, or present and not a whole number above 0."""
    for name in POSITIVE:
        value = c.get(name)
        if value is None and name in POSITIVE[:4]:
            raise ValueError(f"{name} is missing")
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise ValueError(f"{name} is {value!r}; expected a whole number above 0")


def arch_from_config(cfg: dict[str, Any], key: str, total_size: int | None = None) -> ModelArch:
    """A ModelArch from a Hugging Face config.json (text config of multimodal models included)."""
    c = {**cfg, **cfg.get("text_config", {})}
    _check_numbers(c)
    heads = c["num_attention_heads"]
    if "qk_nope_head_dim" in c:  # MLA: newer transformers write head_dim = the rope part only
        head_dim = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
    else:
        head_dim = c.get("head_dim") or c["hidden_size"] // heads
    quant = (c.get("quantization_config") or {}).get("quant_method")
    dtype = "fp8" if quant == "fp8" else str(c.get("torch_dtype") or c.get("dtype") or "bfloat16")
    arch = ModelArch(
        key=key, num_layers=c["num_hidden_layers"], num_attention_heads=heads,
        num_kv_heads=c.get("num_key_value_heads") or heads, head_dim=head_dim, hidden_size=c["hidden_size"],
        vocab_size=c["vocab_size"], max_context=c.get("max_position_embeddings") or 4096, num_params=1.0,
        intermediate_size=c.get("intermediate_size"),
        num_experts=c.get("num_local_experts") or c.get("n_routed_experts") or c.get("num_experts"),
        num_experts_per_token=c.get("num_experts_per_tok"), kv_lora_rank=c.get("kv_lora_rank"),
        qk_rope_head_dim=c.get("qk_rope_head_dim") if c.get("kv_lora_rank") else None,
        weights_dtype=dtype, source=f"config.json ({key})",
        tie_word_embeddings=bool(c.get("tie_word_embeddings", False)),
    )
    per_param = DTYPE_BYTES.get(dtype)
    params = total_size / per_param if total_size and per_param and not quant else estimate_params(arch)
    return replace(arch, num_params=params)


def from_reader(read: Reader, key: str, where: str) -> ModelInfo | None:
    """ModelInfo from a model folder's config.json (and safetensors index), or None without config.json."""
    raw = read(CONFIG)
    if raw is None:
        return None
    try:
        cfg = json.loads(raw)
        index = read(INDEX)
        total = int(json.loads(index)["metadata"]["total_size"]) if index else None
        arch = arch_from_config(cfg, key, total)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        why = f"{e.args[0]} is missing" if isinstance(e, KeyError) else str(e)
        raise SizingError(f"{where}/{CONFIG} is not a usable model config: {why}",
                          "check the weights folder, or set model.catalog / model.architecture",
                          where="model.weights") from None
    prequantized = bool(cfg.get("quantization_config"))
    return ModelInfo(arch, f"config.json at {where}", total, prequantized)


def resolve(d: Deployment, read: Reader | None = None) -> ModelInfo:
    """The model's architecture: config.json (reader, or a local weights folder), else catalog, else override."""
    m = d.model
    if read is None and m.weights.startswith("/") and Path(m.weights, CONFIG).is_file():
        read = local_reader(Path(m.weights))
    if read is not None and (info := from_reader(read, m.catalog or m.name, m.weights)) is not None:
        return info
    found = find_model(m.catalog or m.name)
    if found is not None:
        return ModelInfo(found, "catalog")
    if m.architecture is not None:
        a = m.architecture
        return ModelInfo(ModelArch(key=m.name, source="stack model.architecture", **a.model_dump()),
                         "stack model.architecture")
    if m.catalog:
        model(m.catalog)  # raises CatalogError with a did-you-mean
    raise SizingError(f"the architecture of {m.name!r} is unknown (no config.json, not in the catalog)",
                      f"set model.catalog to a catalog key ({', '.join(sorted(models()))}) or add model.architecture",
                      where="model.catalog" if m.catalog else "model.name")


def weights_on_gpus(info: ModelInfo, quantization: str | None, dtype: str) -> tuple[int, str]:
    """(bytes the weights take on the GPUs, where the figure came from)."""
    if info.checkpoint_bytes and (quantization is None or info.prequantized):
        return info.checkpoint_bytes, "safetensors index total_size"
    how = quantization or (info.arch.weights_dtype if dtype == "auto" else dtype)
    return weight_bytes(info.arch, quantization, dtype), f"{info.arch.num_params / 1e9:.2f}B params x {how}"
