"""A GPU the catalog lacks, declared in the stack: sized, priced, preflighted like a catalog one; bad fields
are one bullet each."""
from __future__ import annotations

import pytest

from infra.stack.stackfile import load_stack
from infra.targets.ssh import preflight
from infra.targets.ssh.args import host_args, props_of
from infra.targets.ssh.plan import plan_deployment
from tests.sizing.test_plan import _state_dir, make_stack, plan_json  # noqa: F401  (the fixture is used)
from tests.targets.ssh.test_ssh_facts import probe_output, req
from infra.targets.ssh import facts

# An RTX PRO 6000 Blackwell Server Edition as a user would declare it (not in the catalog).
PRO = {"name": "RTX-PRO-6000", "product_names": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"],
       "memory_mib": 97887, "bandwidth_tbps": 1.79, "compute_capability": "12.0", "fp8": True, "fp4": True}
SMALL = {**PRO, "name": "Small-16", "memory_mib": 16384, "bandwidth_tbps": 0.5, "compute_capability": "8.9",
         "fp4": False}


def bullets(cli, path: str) -> list[str]:
    r = cli("validate", path)
    assert r.exit_code == 1, r.output
    return [line.strip() for line in r.stderr.splitlines() if line.strip().startswith("•")]


def test_declared_gpu_plans_like_a_catalog_one(cli, tmp_path):
    code, doc = plan_json(cli, make_stack(tmp_path, "d", provider={"gpu": PRO}))
    assert code == 0 and doc["fits"] and doc["gpu"] == "RTX-PRO-6000" and doc["cpm_usd"] > 0
    assert cli("validate", make_stack(tmp_path, "v", provider={"gpu": PRO})).exit_code == 0
    # same figures as a catalog row with the same memory and bandwidth would give
    code, h20 = plan_json(cli, make_stack(tmp_path, "h", provider={"gpu": "H100-NVL"}))
    assert doc["kv_bytes_per_token"] == h20["kv_bytes_per_token"]


def test_declared_gpu_too_small_is_refused_with_a_fix(cli, tmp_path):
    path = make_stack(tmp_path, "s", engine={"quantization": None, "max_model_len": 131072},
                      provider={"gpu": SMALL})
    code, doc = plan_json(cli, path)
    assert code == 1 and not doc["fits"] and "Small-16" in doc["reason"] and doc["fixes"]
    ok = make_stack(tmp_path, "ok", engine={"max_model_len": 8192}, provider={"gpu": SMALL})
    assert cli("plan", ok).exit_code == 0  # fp8 weights at 8k fit in 16 GiB


def test_no_fp8_tensor_cores_is_noted_for_a_declared_gpu(cli, tmp_path):
    code, doc = plan_json(cli, make_stack(tmp_path, "n", provider={"gpu": {**PRO, "fp8": False}}))
    assert code == 0 and any("RTX-PRO-6000 has no FP8" in n for n in doc["notes"])


@pytest.mark.parametrize("change,field", [
    ({"memory_mib": -64}, "provider.gpu.memory_mib"), ({"bandwidth_tbps": 0}, "provider.gpu.bandwidth_tbps"),
    ({"compute_capability": 9.0}, "provider.gpu.compute_capability"), ({"fp8": "yes"}, "provider.gpu.fp8"),
    ({"product_names": []}, "provider.gpu.product_names"), ({"name": " x"}, "provider.gpu.name"),
])
def test_a_bad_field_is_one_bullet_naming_it(cli, tmp_path, change, field):
    found = bullets(cli, make_stack(tmp_path, "b", provider={"gpu": {**PRO, **change}}))
    assert len(found) == 1 and found[0].startswith(f"• {field}:"), found


def test_missing_and_misspelt_fields(cli, tmp_path):
    gpu = {k: v for k, v in PRO.items() if k != "fp8"} | {"memory_gib": 64}
    gpu.pop("memory_mib")
    found = bullets(cli, make_stack(tmp_path, "m", provider={"gpu": gpu}))
    assert any(f.startswith("• provider.gpu.fp8: required field is missing") for f in found), found
    assert any(f.startswith("• provider.gpu.memory_gib: unknown key") and "memory_mib" in f for f in found), found
    assert not any("catalog" in f.split(":")[0] or "declared" in f.split(":")[0] for f in found), found


def test_a_string_is_still_a_catalog_name(cli, tmp_path):
    (line,) = bullets(cli, make_stack(tmp_path, "u", provider={"gpu": "RTX-PRO-6000"}))
    assert line.startswith("• provider.gpu: unknown GPU 'RTX-PRO-6000'") and "product_names" in line
    (line,) = bullets(cli, make_stack(tmp_path, "i", provider={"gpu": 5}))
    assert line.startswith("• provider.gpu: expected a string"), line


def test_ssh_preflight_matches_the_declared_names(tmp_path):
    d = load_stack(make_stack(tmp_path, "p", provider={"gpu": {**PRO, "product_names": ["NVIDIA  H200"]}})).deployment
    host = plan_deployment(d).hosts[0].host
    assert host.gpu == "RTX-PRO-6000" and host.gpu_names == ("NVIDIA  H200",)
    assert host_args(props_of(host)) == host  # through Pulumi's inputs and back
    f = facts.parse_facts(probe_output())  # the captured H200 host
    assert preflight.gaps(f, req(gpu=host.gpu, gpu_names=host.gpu_names)) == []
    (gap,) = preflight.gaps(f, req(gpu="RTX-PRO-6000", gpu_names=tuple(PRO["product_names"])))
    assert gap.startswith("GPU type: the stack wants RTX-PRO-6000 (provider.gpu) but the host has NVIDIA H200")


def test_catalog_stacks_keep_their_host_inputs():
    host = plan_deployment(load_stack("eu-ssh").deployment).hosts[0].host
    assert host.gpu == "H100-80GB" and "gpu_names" not in props_of(host)
