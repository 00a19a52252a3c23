"""The catalog: GPUs, provider prices and model architectures, each row with its source."""
from infra.sizing.catalog.loader import (
    CatalogError, find_model, gpu, gpu_for_product_name, gpus, model, models, provider, providers, resolve_gpu,
)
from infra.sizing.catalog.types import GIB, MIB, GpuSpec, ModelArch, ProviderPrices

__all__ = [
    "CatalogError", "GIB", "MIB", "GpuSpec", "ModelArch", "ProviderPrices", "find_model", "gpu",
    "gpu_for_product_name", "gpus", "model", "models", "provider", "providers", "resolve_gpu",
]
