"""The catalog: every row is complete and cited, lookups work, product names match real nvidia-smi output."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from infra.sizing import catalog
from infra.sizing.catalog import CatalogError

FIXTURES = Path(__file__).parents[1] / "fixtures" / "gpu-host"  # real captures of an H200 host
REQUIRED_GPUS = {"H100-80GB", "H200", "A100-40GB", "A100-80GB", "B200", "L40S"}


def test_required_gpus_present_with_sources():
    gpus = catalog.gpus()
    assert REQUIRED_GPUS <= set(gpus)
    for spec in gpus.values():
        assert spec.source and spec.product_names and spec.memory_mib > 10_000
        assert re.fullmatch(r"\d+\.\d", spec.compute_capability)
        assert spec.architecture in {"ampere", "ada", "hopper", "blackwell"}


def test_fp8_follows_compute_capability():
    # FP8 tensor cores arrived with Ada (8.9) and Hopper (9.0); A100 (8.0) has none (docs/facts.md).
    for spec in catalog.gpus().values():
        assert spec.fp8 == (float(spec.compute_capability) >= 8.9), spec.key


def test_h200_matches_the_captured_host():
    row = (FIXTURES / "h200" / "smi_query.txt").read_text().splitlines()[2].split(", ")
    name, total, cc = row[1], row[3], row[7]
    key = catalog.gpu_for_product_name(name)
    assert key == "H200"
    spec = catalog.gpu(key)
    assert f"{spec.memory_mib} MiB" == total
    assert spec.compute_capability == cc


@pytest.mark.parametrize("name,key", [
    ("NVIDIA H100 80GB HBM3", "H100-80GB"), ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
    ("NVIDIA A100-SXM4-80GB", "A100-80GB"), ("NVIDIA B200", "B200"), ("NVIDIA L40S", "L40S"),
    ("  NVIDIA  H200 ", "H200"), ("NVIDIA GeForce RTX 4090", None),
])
def test_gpu_for_product_name(name, key):
    assert catalog.gpu_for_product_name(name) == key


def test_lookups_are_case_insensitive_and_suggest():
    assert catalog.gpu("h100-80gb").key == "H100-80GB"
    with pytest.raises(CatalogError) as e:
        catalog.gpu("H100")
    assert "H100-80GB" in e.value.render() and e.value.where == "provider.gpu"
    with pytest.raises(CatalogError) as e:
        catalog.model("llama-3.1-7b")
    assert "did you mean" in e.value.render()
    with pytest.raises(CatalogError):
        catalog.provider("awz")


@pytest.mark.parametrize("name,key", [
    ("llama-3.1-8b-instruct", "llama-3.1-8b"), ("meta-llama/Llama-3.1-70B-Instruct", "llama-3.1-70b"),
    ("Qwen2.5-72B-Instruct", "qwen2.5-72b"), ("mixtral-8x7b", "mixtral-8x7b"),
    ("deepseek-ai/DeepSeek-V3", "deepseek-v3"),
])
def test_model_aliases(name, key):
    assert catalog.model(name).key == key


def test_models_required_and_consistent():
    need = {"llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "llama-3.3-70b", "qwen2.5-7b", "qwen2.5-72b",
            "mistral-7b", "mixtral-8x7b", "deepseek-v3"}
    models = catalog.models()
    assert need <= set(models)
    for m in models.values():
        assert m.source and m.num_attention_heads % m.num_kv_heads == 0
        assert (m.num_experts is None) == (m.num_experts_per_token is None)
    assert models["deepseek-v3"].is_mla and not models["llama-3.1-8b"].is_mla


def test_providers_have_eu_cloud_and_two_hyperscalers():
    provs = catalog.providers()
    eu = provs["example-eu-cloud"]
    assert (eu.price("H100-80GB"), eu.price("A100-80GB"), eu.price("B200")) == (2.79, 1.59, 6.59)
    assert eu.price("H100-80GB", "dedicated") == 3.59 and eu.egress_per_gb == 0
    hyperscalers = [p for k, p in provs.items() if k in ("aws", "azure", "gcp")]
    assert len(hyperscalers) >= 2
    for p in hyperscalers:
        assert p.price("H100-80GB") and any(p.price(g) for g in ("A100-40GB", "A100-80GB")) and p.source
    for p in provs.values():
        assert set(p.prices) <= set(catalog.gpus())


def test_cited_facts_file_is_in_the_repository():
    root = Path(__file__).parents[2]
    assert (root / "docs" / "facts.md").is_file()
    text = (root / "infra" / "sizing" / "catalog" / "gpus.yaml").read_text()
    assert "facts.md" in text and "facts.md" not in text.replace("docs/facts.md", "")
