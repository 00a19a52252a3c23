"""The stack file: examples validate, broken ones fail with one clear bullet per problem."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from infra.errors import ConfigError
from infra.stackfile import load_stack
from tests.conftest import STACKS

EXAMPLE = next(p for p in STACKS if p.name == "Pulumi.eu-ssh.yaml")


def write(tmp_path: Path, text: str, name: str = "Pulumi.t.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def mutate(tmp_path: Path, *pairs: tuple[str, str]) -> Path:
    text = EXAMPLE.read_text()
    for old, new in pairs:
        assert old in text, old
        text = text.replace(old, new, 1)
    return write(tmp_path, text)


def problems(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as e:
        load_stack(str(path))
    return [p.render() for p in e.value.problems]


def test_at_least_three_examples_exist():
    assert len(STACKS) >= 3


@pytest.mark.parametrize("stack_file", STACKS, ids=lambda p: p.stem)
def test_every_example_validates(cli, stack_file):
    result = cli("validate", str(stack_file))
    assert result.exit_code == 0, result.output
    assert result.output.startswith("OK ")


def test_examples_differ_only_in_target_storage_provider():
    docs = [yaml.safe_load(p.read_text())["config"]["inferry:deployment"] for p in STACKS]
    for section in ("model", "engine", "serving", "policy"):
        assert all(d[section] == docs[0][section] for d in docs), section
    assert {frozenset(d) for d in docs} == {frozenset(docs[0])}
    # the raw text of model and engine is byte-identical too (a migration changes nothing that serves)
    blocks = {re.search(r"    model:\n.*?    target:", p.read_text(), re.S).group(0) for p in STACKS}
    assert len(blocks) == 1


def test_stack_name_resolves_under_stacks():
    assert load_stack("eu-ssh").deployment.model.name == "llama-3.1-8b-instruct"


def test_missing_file(cli, tmp_path):
    result = cli("validate", str(tmp_path / "Pulumi.none.yaml"))
    assert result.exit_code == 1
    assert "stack file not found" in result.output and "Traceback" not in result.output


def test_yaml_syntax_error_has_line_and_column(tmp_path):
    path = write(tmp_path, "config:\n  inferry:deployment:\n    model: {name: x\n    engine: 1\n")
    [msg] = problems(path)
    assert re.search(r"line \d+, column \d+", msg)


def test_unknown_key_did_you_mean(tmp_path):
    path = mutate(tmp_path, ("max_model_len: 32768", "max_model_lenn: 32768"))
    assert problems(path) == ["engine.max_model_lenn: unknown key; did you mean 'max_model_len'?"]


def test_unknown_key_in_target_and_list(tmp_path):
    path = mutate(tmp_path, ("user: ubuntu, name: gpu-mad-2", "usr: ubuntu, name: gpu-mad-2"))
    assert problems(path) == ["target.hosts[1].usr: unknown key; did you mean 'user'?"]


def test_wrong_type_and_range_name_field_and_found(tmp_path):
    path = mutate(tmp_path, ("gpu_memory_utilization: 0.9", "gpu_memory_utilization: 1.5"),
                  ("gpu_count: 1", "gpu_count: one"))
    msgs = problems(path)
    assert len(msgs) == 2
    assert msgs[0].startswith("engine.gpu_memory_utilization:") and "1.5" in msgs[0]
    assert msgs[1].startswith("provider.gpu_count:") and "'one'" in msgs[1]


def test_missing_required_field(tmp_path):
    path = mutate(tmp_path, ("      price_per_gpu_hour: 2.79\n", ""))
    assert problems(path) == ["provider.price_per_gpu_hour: required field is missing; add it"]


def test_unknown_engine_kind(tmp_path):
    path = mutate(tmp_path, ("kind: vllm", "kind: vllmm"))
    [msg] = problems(path)
    assert msg.startswith("engine.kind: unknown kind") and "'vllm'" in msg


def test_plain_text_secret_inline_is_refused_without_echo(tmp_path):
    path = mutate(tmp_path, ("api_key: {config: apiKey}", "api_key: sk-very-secret-value"))
    [msg] = problems(path)
    assert msg.startswith("serving.api_key: secret written in plain text")
    assert "sk-very-secret-value" not in msg


def test_plain_text_secret_config_value_names_fix(tmp_path):
    text = re.sub(r"(inferry:apiKey:\n)    secure: \S+", r"\1    hunter2-plain", EXAMPLE.read_text())
    text = text.replace("inferry:apiKey:\n    hunter2-plain", "inferry:apiKey: hunter2-plain")
    msgs = problems(write(tmp_path, text))
    assert len(msgs) == 1
    assert "plain text" in msgs[0] and "pulumi config set --secret" in msgs[0]
    assert "hunter2-plain" not in msgs[0]


def test_secret_not_set(tmp_path):
    text = re.sub(r"  inferry:apiKey:\n    secure: \S+\n", "", EXAMPLE.read_text())
    assert problems(write(tmp_path, text)) == [
        "serving.api_key: secret inferry:apiKey is not set; run `pulumi config set --secret --stack t "
        "inferry:apiKey VALUE`"]


def test_env_secret_ref_needs_no_config(tmp_path):
    text = EXAMPLE.read_text().replace("api_key: {config: apiKey}", "api_key: {env: INFERRY_API_KEY}")
    text = re.sub(r"  inferry:apiKey:\n    secure: \S+\n", "", text)
    assert load_stack(str(write(tmp_path, text))).deployment.serving.api_key.env == "INFERRY_API_KEY"


def test_residency_contradiction(tmp_path):
    path = mutate(tmp_path, ("      region: es-madrid\n      bucket", "      region: us-east-1\n      bucket"))
    [msg] = problems(path)
    assert msg.startswith("storage.region: outside the EU") and "us-east-1" in msg


def test_unknown_region_under_residency_asks_to_list_it(tmp_path):
    path = mutate(tmp_path, ("      region: es-madrid\n      gpu:", "      region: mars-1\n      gpu:"))
    [msg] = problems(path)
    assert msg.startswith("provider.region: not known to be in the EU")
    path.write_text(path.read_text().replace("residency: eu", "residency: eu\n      allowed_regions: [mars-1]"))
    load_stack(str(path))


def test_gpu_count_the_target_cannot_satisfy(tmp_path):
    path = mutate(tmp_path, ("max_num_seqs: 128", "max_num_seqs: 128\n      tensor_parallel_size: 4"))
    [msg] = problems(path)
    assert msg.startswith("engine.tensor_parallel_size: needs 4 GPUs") and "provider.gpu_count" in msg


def test_bucket_mismatch(tmp_path):
    path = mutate(tmp_path, ("weights: s3://inferry-weights/", "weights: s3://other-bucket/"))
    [msg] = problems(path)
    assert msg.startswith("model.weights: names bucket 'other-bucket'")


def test_many_problems_one_bullet_each_exit_1(cli, tmp_path):
    path = mutate(tmp_path, ("max_model_len: 32768", "max_model_lenn: 32768"),
                  ("gpu_memory_utilization: 0.9", "gpu_memory_utilization: 0"),
                  ("port: 8000", "port: 99999"))
    result = cli("validate", str(path))
    assert result.exit_code == 1
    bullets = [line for line in result.output.splitlines() if line.strip().startswith("•")]
    assert len(bullets) == 3 and "Traceback" not in result.output


def test_duplicate_hosts_and_unknown_lb_host(tmp_path):
    path = mutate(tmp_path, ("name: gpu-mad-2", "name: gpu-mad-1"))
    [msg] = problems(path)
    assert "unique" in msg and "gpu-mad-1" in msg


def test_speculative_requires_fields(tmp_path):
    path = mutate(tmp_path, ("max_num_seqs: 128", "max_num_seqs: 128\n      speculative: {method: eagle, num_speculative_tokens: 3}"))
    [msg] = problems(path)
    assert msg.startswith("engine.speculative:") and "needs 'model'" in msg


def test_top_level_typo(tmp_path):
    text = EXAMPLE.read_text().replace("config:\n", "confg:\n", 1)
    msgs = problems(write(tmp_path, text))
    assert msgs[0] == "confg: unknown top-level key; did you mean 'config'?"


def test_deployment_key_typo(tmp_path):
    text = EXAMPLE.read_text().replace("inferry:deployment:", "inferry:deploymnt:", 1)
    assert "inferry:deployment: required config key is missing; did you mean 'deployment'?" in problems(write(tmp_path, text))
