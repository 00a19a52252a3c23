"""A new user's usual mistakes: a value outside a fixed set, a misspelt key around the deployment.

The program's messages are read under Pulumi's mocks (tests/support/harness.py): the exception itself, which
the real engine would only print."""
from __future__ import annotations

import pytest

from infra.errors import ConfigError
from tests.conftest import STACKS
from tests.stack.test_stackfile import EXAMPLE, mutate, problems, write

K8S = next(p for p in STACKS if p.name == "Pulumi.aws-k8s.yaml")


@pytest.mark.parametrize("old, new, expected", [
    ("runtime: docker", "runtime: dokcer",
     "target.runtime: expected one of 'docker', 'process' (found 'dokcer'); did you mean 'docker'?"),
    ("quantization: fp8", "quantization: fp9", "engine.quantization: expected one of 'fp8', 'awq', "),
    ("runtime: docker", "runtime: Docker", "target.runtime: expected one of 'docker', 'process' "
     "(found 'Docker'); did you mean 'docker'?"),
    ("runtime: docker", "runtime: docker\n      rollout: rolling-update",
     "target.rollout: expected one of 'rolling', 'parallel' (found 'rolling-update'); did you mean 'rolling'?"),
    ("quantization: fp8", "quantization: fp8\n      kv_cache_dtype: fp8-e4m3",
     "engine.kv_cache_dtype: expected one of 'auto', 'fp8', 'fp8_e4m3', 'fp8_e5m2' (found 'fp8-e4m3'); "
     "did you mean 'fp8_e4m3'?"),
    ("quantization: fp8", "quantization: fp8\n      block_size: \"16\"",
     "engine.block_size: expected one of 8, 16, 32, 64, 128 (found '16'); write 16 without quotes"),
    ("quantization: fp8", "quantization: fp8\n      block_size: 17", "engine.block_size: expected one of 8, 16, "
     "32, 64, 128 (found 17)"),
])
def test_a_value_outside_a_fixed_set_gets_a_did_you_mean(tmp_path, old, new, expected):
    [msg] = problems(mutate(tmp_path, (old, new)))
    assert msg.startswith(expected), msg
    assert "fp9" not in expected or msg.endswith("(found 'fp9'); did you mean 'fp8'?")


@pytest.mark.parametrize("old, new, expected", [
    ("operator: Exists", "operator: exist",
     "target.tolerations[0].operator: expected one of 'Exists', 'Equal' (found 'exist'); did you mean 'Exists'?"),
    ("effect: NoSchedule", "effect: NoSchedul", "target.tolerations[0].effect: expected one of 'NoSchedule', "
     "'PreferNoSchedule', 'NoExecute' (found 'NoSchedul'); did you mean 'NoSchedule'?"),
    ("engine: keda", "engine: kdea",
     "target.autoscaling.engine: expected one of 'keda', 'hpa' (found 'kdea'); did you mean 'keda'?"),
    ("weights_delivery: init-container", "weights_delivery: initcontainer", "target.weights_delivery: expected "
     "one of 'init-container', 'pvc', 'node-cache', 'stream' (found 'initcontainer'); did you mean 'init-container'?"),
    ("residency: eu", "residency: EU", "policy.residency: expected one of 'eu' (found 'EU'); did you mean 'eu'?"),
])
def test_choices_nested_in_lists_and_sections(tmp_path, old, new, expected):
    text = K8S.read_text()
    assert old in text
    assert problems(write(tmp_path, text.replace(old, new, 1))) == [expected]


def test_a_choice_with_nothing_close_lists_the_set_only(tmp_path):
    [msg] = problems(mutate(tmp_path, ("runtime: docker", "runtime: kubernetes")))
    assert msg == "target.runtime: expected one of 'docker', 'process' (found 'kubernetes')"


@pytest.mark.parametrize("key", ["inferry:deploymnet", "inferry:Deployment", "infery:deployment", "deployment",
                                 "inferry_deployment"])
def test_a_misspelt_deployment_key_is_named(tmp_path, key):
    text = EXAMPLE.read_text().replace("inferry:deployment:", f"{key}:", 1)
    assert problems(write(tmp_path, text)) == [f"{key}: unknown config key; did you mean 'inferry:deployment'?"]


def test_the_deployment_under_a_misspelt_key_is_checked_too(tmp_path):
    text = EXAMPLE.read_text().replace("inferry:deployment:", "inferry:deploymnet:", 1)
    msgs = problems(write(tmp_path, text.replace("runtime: docker", "runtime: dokcer")))
    assert msgs[0] == "inferry:deploymnet: unknown config key; did you mean 'inferry:deployment'?"
    assert msgs[1].startswith("target.runtime: expected one of 'docker', 'process'") and len(msgs) == 2


@pytest.mark.parametrize("key", ["kubernetes:deployment", "aws:region", "gcp:deployment"])
def test_other_namespaces_are_never_taken_for_the_deployment(tmp_path, key):
    text = EXAMPLE.read_text().replace("inferry:deployment:", f"{key}:", 1)
    msgs = problems(write(tmp_path, text))
    assert msgs == ["inferry:deployment: required config key is missing; add it: model, engine, target, "
                    "storage, provider and serving (see `inferry init NAME`)"]


def test_other_namespaces_beside_the_deployment_are_left_alone(cli, tmp_path):
    text = EXAMPLE.read_text() + "  aws:region: eu-west-1\n  kubernetes:context: prod\n  infra:note: hello\n"
    result = cli("validate", str(write(tmp_path, text)))
    assert result.exit_code == 0, result.output
    assert "warning" not in result.output


def test_a_misspelt_config_section_is_named_once_and_read(tmp_path):
    text = EXAMPLE.read_text().replace("config:\n", "confg:\n", 1).replace("runtime: docker", "runtime: dokcer")
    msgs = problems(write(tmp_path, text))
    assert msgs[0] == "confg: unknown top-level key; did you mean 'config'?"
    assert msgs[1].startswith("target.runtime: expected one of") and len(msgs) == 2


def test_a_plain_inferry_key_nothing_reads_is_an_error(tmp_path):
    text = EXAMPLE.read_text() + "  inferry:region: es-madrid\n"
    assert problems(write(tmp_path, text)) == ["inferry:region: unknown config key"]


def test_a_secret_nothing_references_is_a_warning(cli, tmp_path):
    text = EXAMPLE.read_text().replace("inferry:apiKey:", "inferry:oldApiKey:", 1)
    text += "  inferry:apiKey:\n    secure: v1:YfudJWFFYlxtssW3:he7AjbMY9dHtyEzS86rzs7v/EyiOKOWtsUkQjarNz/HpVmhCG587ZA==\n"
    result = cli("validate", str(write(tmp_path, text)))
    assert result.exit_code == 0, result.output
    assert ("warning: inferry:oldApiKey: secret is set but no {config: oldApiKey} reference in inferry:deployment "
            "reads it; reference it, or remove it with `pulumi config rm --stack t inferry:oldApiKey`") in result.output


def test_a_reference_with_a_typo_names_the_secret_that_is_set(tmp_path):
    text = EXAMPLE.read_text().replace("{config: apiKey}", "{config: apikey}", 1)
    [msg] = problems(write(tmp_path, text))
    assert msg.startswith("serving.api_key: secret inferry:apikey is not set; did you mean {config: apiKey}? "
                          "otherwise in the project folder run `pulumi config set --secret")


def _program_config(key: str) -> tuple[dict, list]:
    from tests.support.harness import stack_config

    config, secret = stack_config(EXAMPLE)
    config[key] = config.pop("inferry:deployment")
    return config, secret


@pytest.mark.parametrize("key, expected", [
    ("inferry:deploymnet", "inferry:deploymnet: unknown config key; did you mean 'inferry:deployment'?"),
    ("aws:deployment", "inferry:deployment: required config key is missing; add it"),
])
def test_the_program_names_a_misspelt_deployment_key(key, expected):
    from infra.stack.stackfile import load_from_pulumi
    from tests.support.harness import run

    seen: list[ConfigError] = []

    def program():
        try:
            load_from_pulumi()
        except ConfigError as e:
            seen.append(e)

    run(program, *_program_config(key))
    [problem] = seen[0].problems
    assert problem.render().startswith(expected)
