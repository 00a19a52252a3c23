"""validate tells everything at once: schema, cross-section and sizing problems in one run, each once, with a
did-you-mean where one exists and no whole section quoted back."""
from __future__ import annotations

from infra.sizing import catalog
from infra.stack.regions import KNOWN_REGIONS, in_eu
from tests.stack.test_stackfile import mutate, problems


def test_three_mistakes_in_three_sections_come_out_in_one_run(tmp_path, cli):
    path = mutate(tmp_path, ("kind: vllm", "kind: vlm"), ("gpu: H100-80GB", "gpu: H100"),
                  ("max_model_len: 32768", "max_model_length: 32768"))
    found = problems(path)
    assert found == [
        "engine.kind: unknown kind; expected one of 'vllm', 'tensorrt-llm', 'sglang' (found 'vlm'); did you mean 'vllm'?",
        "engine.max_model_length: unknown key; did you mean 'max_model_len'?",
        "provider.gpu: unknown GPU 'H100'; did you mean 'H100-80GB'?; or, for a GPU the catalog lacks, declare "
        "it: provider.gpu: {name, product_names, memory_mib, bandwidth_tbps, compute_capability, fp8} "
        "(docs/sizing.md)",
    ]
    result = cli("validate", str(path))
    assert result.exit_code == 1 and result.output.count("•") == 3, result.output


def test_target_kind_gets_a_did_you_mean_and_the_section_is_not_quoted(tmp_path):
    path = mutate(tmp_path, ("kind: ssh", "kind: sshh"), ("user: ubuntu, name: gpu-mad-1", "usr: ubuntu, name: gpu-mad-1"))
    found = problems(path)
    assert found[0] == ("target.kind: unknown kind; expected one of 'ssh', 'kubernetes' (found 'sshh'); "
                        "did you mean 'ssh'?")
    assert any(p.startswith("target.hosts[0].usr: unknown key; did you mean 'user'?") for p in found), found
    assert not [p for p in found if "203.0.113.11" in p or "{" in p], found  # no section dumped into a message


def test_max_model_len_above_the_models_limit_is_one_bullet_with_a_fix_that_works(tmp_path, cli):
    path = mutate(tmp_path, ("max_model_len: 32768", "max_model_len: 1000000"))
    result = cli("validate", str(path))
    [msg] = [line.strip("• ") for line in result.output.splitlines() if "•" in line]
    assert result.exit_code == 1 and msg.startswith("engine.max_model_len: max_model_len 1,000,000 exceeds llama-3.1-8b's maximum context")
    assert "set engine.max_model_len: 131072 (the model's maximum context)" in msg
    assert "smaller" not in msg
    fixed = path.read_text().replace("max_model_len: 1000000", "max_model_len: 131072")
    path.write_text(fixed)
    assert cli("validate", str(path)).exit_code == 0  # the printed fix works


def test_misspelt_region_under_residency_is_refused_with_a_did_you_mean(tmp_path):
    path = mutate(tmp_path, ("      region: es-madrid\n      gpu:", "      region: es-madird\n      gpu:"))
    [msg] = problems(path)
    assert msg.startswith("provider.region: unknown region") and "did you mean 'es-madrid'?" in msg
    assert "policy.allowed_regions" in msg


def test_cross_section_and_sizing_problems_come_together(tmp_path):
    path = mutate(tmp_path, ("      region: es-madrid\n      gpu:", "      region: es-madird\n      gpu:"),
                  ("max_model_len: 32768", "max_model_len: 1000000"))
    found = problems(path)
    assert [p.split(":")[0] for p in found] == ["provider.region", "engine.max_model_len"], found


def test_every_catalog_region_has_a_known_country():
    for prov in catalog.providers().values():
        for region in prov.regions:
            assert region in KNOWN_REGIONS, f"{prov.key}: {region} has no country in infra/stack/regions.py"
    assert in_eu("es-madrid", []) is True and in_eu("es-madird", []) is None
