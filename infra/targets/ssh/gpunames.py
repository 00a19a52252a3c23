"""nvidia-smi product name -> catalog GPU key (the sizing catalog's function when it is there)."""
from __future__ import annotations

import re

# Fallback rules, used only when infra.catalog has no gpu_for_product_name: (pattern, key).
# Product names as nvidia-smi prints them, e.g. "NVIDIA H200" (../shared/fixtures/gpu-host/h200).
_RULES = [
    (r"\bH200\b", "H200"), (r"\bH100 80GB\b", "H100-80GB"), (r"\bB200\b", "B200"),
    (r"\bA100\b.*\b40GB\b", "A100-40GB"), (r"\bA100\b.*\b80GB\b", "A100-80GB"), (r"\bL40S\b", "L40S"),
]


def catalog_key(product_name: str) -> str | None:
    """The catalog key of a GPU product name, or None when unknown."""
    try:
        from infra.catalog.loader import gpu_for_product_name  # type: ignore[import-not-found]
    except ImportError:
        gpu_for_product_name = None
    if gpu_for_product_name is not None:
        return gpu_for_product_name(product_name)
    for pattern, key in _RULES:
        if re.search(pattern, product_name):
            return key
    return None
