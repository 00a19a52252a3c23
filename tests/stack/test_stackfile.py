"""The stack file: examples validate, broken ones fail with one clear bullet per problem."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from infra.errors import ConfigError
from infra.stack.stackfile import load_stack
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


@pytest.mark.parametrize("value, tag", [('!!int ""', "!!int"), ('!!float "x"', "!!float"), ("!!bool maybe", "!!bool")])
def test_an_explicit_tag_on_a_value_of_another_form_is_refused_with_its_place(tmp_path, value, tag):
    path = write(tmp_path, f"config:\n  inferry:deployment:\n    model: {value}\n")
    [msg] = problems(path)
    assert re.search(r"line 3, column \d+", msg) and f"as {tag}" in msg and "cannot read" in msg, msg


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
        "serving.api_key: secret inferry:apiKey is not set; in the project folder run `pulumi config set "
        "--secret --stack t inferry:apiKey` and type the value (or pipe it in) (a new stack first needs `pulumi "
        "stack init t`)"]


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
    assert msg.startswith("provider.region: unknown region: inferry cannot tell whether it is in the EU")
    path.write_text(path.read_text().replace("residency: eu", "residency: eu\n      allowed_regions: [mars-1]"))
    load_stack(str(path))


def test_gpu_count_the_target_cannot_satisfy(tmp_path):
    path = mutate(tmp_path, ("max_num_seqs: 128", "max_num_seqs: 128\n      tensor_parallel_size: 4"))
    [msg] = problems(path)
    assert msg.startswith("engine.tensor_parallel_size: needs 4 GPUs") and "provider.gpu_count" in msg


def test_bucket_mismatch(tmp_path):
    path = mutate(tmp_path, ("weights: llama", "weights: s3://other-bucket/llama"))
    [msg] = problems(path)
    assert msg.startswith("model.weights: names bucket 'other-bucket'")
    assert "write `weights: llama-3.1-8b-instruct`" in msg


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
    assert problems(write(tmp_path, text)) == ["confg: unknown top-level key; did you mean 'config'?"]


def test_deployment_key_typo(tmp_path):
    text = EXAMPLE.read_text().replace("inferry:deployment:", "inferry:deploymnt:", 1)
    assert problems(write(tmp_path, text)) == ["inferry:deploymnt: unknown config key; did you mean 'inferry:deployment'?"]


def test_control_characters_in_weights_path_are_refused(tmp_path):
    path = mutate(tmp_path, ("weights: llama-3.1-8b-instruct",
                             'weights: "/models/llama\\nrm -rf /"'))
    [msg] = problems(path)
    assert msg.startswith("model.weights: must not contain control characters")



@pytest.mark.parametrize("field,value", [("name: example-eu-cloud", "name: \"\\n\\n  \""),
                                         ("name: example-eu-cloud", "name: ' padded'"),
                                         ("region: es-madrid\n      gpu", "region: \"es-\\rmadrid\"\n      gpu")])
def test_provider_names_print_on_one_line(tmp_path, field, value):
    """Found by fuzzing: a provider name of newlines was accepted and printed into validate's OK line."""
    [msg] = problems(mutate(tmp_path, (field, value)))
    key = "provider.name" if value.startswith("name") else "provider.region"
    assert msg.startswith(f"{key}: expected") and msg.endswith("write it on one line, without leading or trailing spaces")


# Hostile input: each case below was a traceback, a hang or a silent acceptance found by fuzzing.

@pytest.mark.parametrize("value", ["", " null", " ~"])
def test_null_deployment_names_the_key(cli, tmp_path, value):
    path = write(tmp_path, f"config:\n  inferry:deployment:{value}\n")
    assert problems(path) == ["inferry:deployment: expected a mapping of sections (found nothing); put model, engine, "
                              "target, storage, provider and serving under it (see `inferry init NAME`)"]
    result = cli("validate", str(path))
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)


def test_huge_integer_is_refused_not_overflowed(cli, tmp_path):
    path = mutate(tmp_path, ("max_model_len: 32768", "max_model_len: " + "9" * 400))
    [msg] = problems(path)
    assert msg.startswith("engine.max_model_len: Input should be less than or equal to 2147483647")
    assert "(found <an integer of 400 digits>)" in msg
    huge = mutate(tmp_path, ("max_model_len: 32768", "max_model_len: " + "9" * 5000))
    assert "cannot read '9999" in problems(huge)[0]  # past Python's int-from-text limit
    assert cli("validate", str(path)).exit_code == 1


def test_duplicate_keys_are_refused_naming_both_lines(tmp_path):
    twice = "api_key: {config: apiKey}\n      api_key: {config: s3SecretKey}"
    path = mutate(tmp_path, ("api_key: {config: apiKey}", twice))
    first = EXAMPLE.read_text().split("\n").index("      api_key: {config: apiKey}") + 1
    assert problems(path) == [f"line {first + 1}, column 7: duplicate key 'api_key' (first at line {first}); only one "
                              "of them would be used; keep one and delete the other"]
    text = EXAMPLE.read_text().replace("  inferry:apiKey:", "  inferry:s3AccessKey: {secure: v1:YWJjZGVmZ2hpamts:"
                                       "YWJjZGVmZ2hpamtsbW5vcA==}\n  inferry:apiKey:", 1)
    assert "duplicate key 'inferry:s3AccessKey'" in problems(write(tmp_path, text))[0]


@pytest.mark.parametrize("old, new, expected", [
    ("port: 8000", 'port: "8000"', "serving.port: expected a whole number (found '8000'); write 8000 without quotes"),
    ("install_docker: true", 'install_docker: "off"', "target.install_docker: expected true or false (found 'off')"),
    ("install_docker: true", "install_docker: off", "target.install_docker: expected true or false (found 'off')"),
    ("install_docker: true", "install_docker: yes", "target.install_docker: expected true or false (found 'yes')"),
    ("install_docker: true", "install_docker: 1", "target.install_docker: expected true or false (found 1)"),
    ("price_per_gpu_hour: 2.79", 'price_per_gpu_hour: "2.79"', "provider.price_per_gpu_hour: expected a number"),
    ("gpu_count: 1", "gpu_count: 1.0", "provider.gpu_count: expected a whole number (found 1.0); write a whole"),
    ("region: es-madrid\n  ", "region: 1e3\n  ", "storage.region: expected a string (found 1000.0)"),
    ("egress_per_gb: 0.0", "egress_per_gb: .nan", "provider.egress_per_gb: Input should be a finite number"),
])
def test_values_are_never_coerced(tmp_path, old, new, expected):
    [msg] = problems(mutate(tmp_path, (old, new)))
    assert msg.startswith(expected), msg


def test_yaml_1_2_numbers_are_read_as_pulumi_reads_them(tmp_path):
    arch = ("architecture: {num_layers: 32, num_attention_heads: 32, num_kv_heads: 8, head_dim: 128, "
            "hidden_size: 4096, vocab_size: 128256, max_context: 131072, num_params: 8.03e9}")
    path = mutate(tmp_path, ("      weights: ", f"      {arch}\n      weights: "))
    assert load_stack(str(path)).deployment.model.architecture.num_params == 8.03e9


@pytest.mark.parametrize("value", ["hunter2", "correct horse battery staple", "v1:abc:def", "AAAA", "12345"])
def test_secure_value_must_be_ciphertext(tmp_path, value):
    text = re.sub(r"(inferry:apiKey:\n    secure: )\S+", rf"\g<1>{value}", EXAMPLE.read_text())
    [msg] = problems(write(tmp_path, text))
    assert msg.startswith("inferry:apiKey: the secure: value is not Pulumi ciphertext")
    assert "pulumi config set --secret --stack t inferry:apiKey" in msg and value not in msg


def test_ciphertext_forms_pulumi_writes():
    from base64 import b64encode

    from infra.stack.secrets import is_ciphertext

    passphrase = "v1:YfudJWFFYlxtssW3:he7AjbMY9dHtyEzS86rzs7v/EyiOKOWtsUkQjarNz/HpVmhCG587ZA=="
    service = b64encode(bytes(range(7, 90))).decode()  # Pulumi Cloud: the service's ciphertext, base64
    assert is_ciphertext(passphrase, v1_only=True) and is_ciphertext(passphrase, v1_only=False)
    assert is_ciphertext(service, v1_only=False) and not is_ciphertext(service, v1_only=True)
    assert not any(is_ciphertext(v, False) for v in ("hunter2", "a sentence here", "v1:a:b", "sk-abc_123-XYZ"))


@pytest.mark.parametrize("old, new, expected", [
    ("    model:\n", "    1: x\n    model:\n", "1: keys must be strings (found 1); quote the key or remove it"),
    ("    model:\n", "    true: x\n    model:\n", "True: keys must be strings (found True)"),
    ("    model:\n", "    null: x\n    model:\n", "None: keys must be strings (found None)"),
    ("    model:\n", "    '': x\n    model:\n", "'': empty key name; expected one of: model, engine, target"),
    ("      gpu_count: 1\n", "      gpu_count: 1\n      '': 3\n", "provider.'': empty key name; expected one of: name"),
    ("max_num_seqs: 128", 'max_num_seqs: 128\n      extra_args: ["--speculative-config", "' + "[" * 2000 + '"]',
     "engine.extra_args: argument 2 ("),
    ("max_num_seqs: 128", 'max_num_seqs: 128\n      extra_args: ["--max-num-batched-tokens", "' + "9" * 400 + '"]',
     "engine.extra_args: argument 2 ("),
    ("weights: llama-3.1-8b-instruct", "weights: /" + "a/" * 3000, "model.weights: longer than"),
])
def test_odd_keys_and_values_the_checks_cannot_parse(tmp_path, old, new, expected):
    [msg] = problems(mutate(tmp_path, (old, new)))
    assert msg.startswith(expected), msg


@pytest.mark.parametrize("options, expected", [
    ("{kv_cache_config: 5}", "kv_cache_config must be a mapping"),
    ("{speculative_config: {decoding_type: [1]}}", "decoding_type must be a string"),
    ("{kv_cache_config: {1: x}}", "kv_cache_config: key 1 is not a string"),
])
def test_trtllm_extra_options_are_checkable(tmp_path, options, expected):
    engine = f"engine:\n      kind: tensorrt-llm\n      extra_options: {options}\n    target:"
    text = re.sub(r"engine:\n.*?\n    target:", engine, EXAMPLE.read_text(), count=1, flags=re.S)
    [msg] = problems(write(tmp_path, text))
    assert msg.startswith("engine.extra_options:") and expected in msg, msg
    version = text.replace("kind: tensorrt-llm", "kind: tensorrt-llm\n      version: " + "9" * 5000 + ".1.1")
    msgs = problems(write(tmp_path, version))
    assert any(m.startswith("engine.version: expected a TensorRT-LLM release") for m in msgs)


def test_a_plain_text_secret_gets_the_line_to_write_and_the_whole_command(tmp_path):
    text = EXAMPLE.read_text().replace("api_key: {config: apiKey}", "api_key: sk-plain-canary")
    assert "sk-plain-canary" in text
    (found,) = problems(write(tmp_path, text))
    assert found.startswith("serving.api_key: secret written in plain text") and "sk-plain-canary" not in found
    assert "write `api_key: {config: apiKey}` under serving" in found
    assert "`pulumi config set --secret --stack t inferry:apiKey` and type the value" in found
