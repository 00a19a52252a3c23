"""Load the catalog's YAML files once and look rows up by key, with did-you-mean errors."""
from __future__ import annotations

import difflib
import functools
from pathlib import Path
from typing import Any

import yaml

from infra.sizing.catalog.types import GpuSpec, ModelArch, ProviderPrices
from infra.errors import InferryError

HERE = Path(__file__).resolve().parent


class CatalogError(InferryError):
    """A key is not in the catalog."""


@functools.cache
def _read(name: str) -> dict[str, Any]:
    # libyaml when built in (bundled, trusted files): the pure-Python loader took ~40 ms of `inferry plan`
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load((HERE / f"{name}.yaml").read_text(encoding="utf-8"), Loader=loader)  # noqa: S506


@functools.cache
def gpus() -> dict[str, GpuSpec]:
    """Every catalog GPU by key."""
    return {k: GpuSpec(key=k, product_names=tuple(v.pop("product_names")), **v)
            for k, v in ((k, dict(v)) for k, v in _read("gpus").items())}


@functools.cache
def models() -> dict[str, ModelArch]:
    """Every catalog model architecture by key."""
    out = {}
    for k, v in _read("models").items():
        v = dict(v, num_params=float(v["num_params"]))  # YAML 1.1 reads 8.03e9 as a string
        out[k] = ModelArch(key=k, aliases=tuple(v.pop("aliases", ())), **v)
    return out


@functools.cache
def providers() -> dict[str, ProviderPrices]:
    """Every provider price list by key."""
    return {k: ProviderPrices(key=k, regions=tuple(v["regions"]), egress_per_gb=v["egress_per_gb"],
                              prices=v["prices"], source=v["source"])
            for k, v in _read("providers").items()}


def _missing(kind: str, key: str, names: list[str], field: str) -> CatalogError:
    prefixed = [n for n in names if n.lower().startswith(key.strip().lower())]
    guess = prefixed[:1] or difflib.get_close_matches(key, names, n=1, cutoff=0.5)
    hint = f"did you mean '{guess[0]}'?" if guess else f"known: {', '.join(sorted(names))}"
    return CatalogError(f"unknown {kind} {key!r}", hint, where=field)


# How to use a GPU the catalog lacks: the fix of an unknown provider.gpu names it.
DECLARE_GPU = ("or, for a GPU the catalog lacks, declare it: provider.gpu: {name, product_names, memory_mib, "
               "bandwidth_tbps, compute_capability, fp8} (docs/sizing.md)")
# Families by compute capability, for a declared GPU that does not name its architecture.
FAMILIES = ((8.9, "ampere"), (9.0, "ada"), (10.0, "hopper"))


def gpu(key: str) -> GpuSpec:
    """A GPU by catalog key (case-insensitive); CatalogError with a did-you-mean otherwise."""
    table = gpus()
    for k, spec in table.items():
        if k.lower() == key.strip().lower():
            return spec
    missing = _missing("GPU", key, list(table), "provider.gpu")
    raise CatalogError(missing.message, f"{missing.fix}; {DECLARE_GPU}", where=missing.where)


def resolve_gpu(value: Any) -> GpuSpec:
    """The GPU a stack's provider.gpu means: a catalog key, or a GPU declared in the stack (DeclaredGpu)."""
    if isinstance(value, str):
        return gpu(value)
    cc = float(value.compute_capability)
    family = value.architecture or next((f for limit, f in FAMILIES if cc < limit), "blackwell")
    return GpuSpec(key=value.name, product_names=tuple(value.product_names), memory_mib=value.memory_mib,
                   bandwidth_tbps=value.bandwidth_tbps, compute_capability=value.compute_capability,
                   architecture=family, fp8=value.fp8, fp4=value.fp4, source="declared in the stack (provider.gpu)")


def _model_names() -> dict[str, str]:
    names = {}
    for k, m in models().items():
        for name in (k, m.hf_id or k, *m.aliases):
            names[name.lower()] = k
    return names


def find_model(name: str) -> ModelArch | None:
    """A model by key, alias or HF id (case-insensitive, '-instruct' optional), or None."""
    names = _model_names()
    n = name.strip().lower()
    key = names.get(n) or names.get(n.removesuffix("-instruct"))
    return models()[key] if key else None


def model(key: str) -> ModelArch:
    """A model architecture by key or alias; CatalogError with a did-you-mean otherwise."""
    found = find_model(key)
    if found is None:
        raise _missing("model", key, list(models()), "model.catalog")
    return found


def provider(key: str) -> ProviderPrices:
    """A provider's price list by key; CatalogError with a did-you-mean otherwise."""
    table = providers()
    if key in table:
        return table[key]
    raise _missing("provider", key, list(table), "provider.name")


def gpu_for_product_name(name: str) -> str | None:
    """The catalog key whose nvidia-smi product name is `name` (e.g. 'NVIDIA H200' -> 'H200'), or None."""
    wanted = " ".join(name.split()).lower()
    for key, spec in gpus().items():
        if any(wanted == p.lower() for p in spec.product_names):
            return key
    return None
