"""The GPUs users rent beyond the big four: each plans sensibly and its nvidia-smi name maps back."""
from __future__ import annotations

import pytest

from infra.sizing import catalog
from tests.sizing.test_plan import _state_dir, make_stack, plan_json  # noqa: F401  (the fixture is used)

# (catalog key, the exact `nvidia-smi --query-gpu=name` string, GiB as printed, FP8 tensor cores)
NEW = [("L4", "NVIDIA L4", 22.5, True), ("A10G", "NVIDIA A10G", 22.5, False), ("L40", "NVIDIA L40", 45.0, True),
       ("L40S", "NVIDIA L40S", 45.0, True), ("RTX-6000-Ada", "NVIDIA RTX 6000 Ada Generation", 48.0, True),
       ("H100-PCIe", "NVIDIA H100 PCIe", 79.6, True), ("H100-NVL", "NVIDIA H100 NVL", 93.6, True),
       ("H20", "NVIDIA H20", 95.6, True), ("GH200-96GB", "NVIDIA GH200 480GB", 95.6, True),
       ("GH200-144GB", "NVIDIA GH200 144G HBM3e", 143.4, True)]
KEYS = [k for k, _, _, _ in NEW]


@pytest.mark.parametrize("key,name,gib,fp8", NEW, ids=KEYS)
def test_new_gpu_rows(key, name, gib, fp8):
    spec = catalog.gpu(key)
    assert catalog.gpu_for_product_name(name) == key
    assert round(spec.memory_mib / 1024, 1) == gib and spec.fp8 == fp8 and not spec.fp4
    assert "nvidia.com" in spec.source or "nvidia-smi" in spec.source


@pytest.mark.parametrize("key", KEYS)
def test_llama_8b_fp8_at_32k_fits_on_each(cli, tmp_path, key):
    code, doc = plan_json(cli, make_stack(tmp_path, "g", provider={"gpu": key}))
    assert code == 0 and doc["fits"] and doc["gpu"] == key and doc["cpm_usd"] > 0
    assert any("Marlin" in n for n in doc["notes"]) == (not catalog.gpu(key).fp8)


@pytest.mark.parametrize("key,fits", [("L4", False), ("A10G", False), ("L40S", True), ("H100-NVL", True)])
def test_llama_8b_bf16_at_128k_needs_more_than_24_gb(cli, tmp_path, key, fits):
    path = make_stack(tmp_path, "c", engine={"quantization": None, "max_model_len": 131072},
                      provider={"gpu": key})
    code, doc = plan_json(cli, path)
    assert (code == 0) == fits == doc["fits"]
    if not fits:
        assert "KV cache holds" in doc["reason"] and doc["fixes"]


@pytest.mark.parametrize("key,fits", [("L40S", False), ("H100-PCIe", False), ("H100-NVL", True), ("H20", True),
                                      ("GH200-96GB", True), ("GH200-144GB", True)])
def test_llama_70b_fp8_at_8k_needs_more_than_80_gb(cli, tmp_path, key, fits):
    path = make_stack(tmp_path, "b", model={"name": "llama-3.1-70b-instruct"}, engine={"max_model_len": 8192},
                      provider={"gpu": key})
    assert plan_json(cli, path)[1]["fits"] == fits


def test_throughput_follows_memory_bandwidth(cli, tmp_path):
    tps = {k: plan_json(cli, make_stack(tmp_path, k, provider={"gpu": k}))[1]["tokens_per_second"]
           for k in ("L4", "A10G", "H100-PCIe", "H100-NVL", "GH200-144GB")}
    assert tps["L4"] < tps["A10G"] < tps["H100-PCIe"] < tps["H100-NVL"] < tps["GH200-144GB"]


def test_fp4_is_blackwell_only_and_prices_name_catalog_gpus():
    assert {k for k, g in catalog.gpus().items() if g.fp4} == {"B200"}
    for prov in catalog.providers().values():
        assert set(prov.prices) <= set(catalog.gpus()), prov.key
