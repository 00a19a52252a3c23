"""Hostile strings in paths, flags and secrets cannot change a command, a YAML value or a unit line."""
from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.render import quoting
from infra.errors import InferryError
from infra.targets.ssh.render import COMPOSE, LAUNCHER, render_env, render_ssh_files, ssh_spec
from tests.render.test_render import ssh_deployment

HOSTILE = [
    "/data/evil dir/m'o\"d$(touch PWNED)`touch PWNED2`;touch PWNED3 #",
    "/data/new\nline/--port 1/${HOME}/%n/\\x41/\t/é",
    "/data/-rf/ '' \"\" $$ %% \\\\",
    "/data/plain\nnewline\r\u2028\x85/{{ x }}",
]
FAKE_ENGINE = "#!/bin/sh\nexec python3 -c 'import json,sys,os; json.dump(sys.argv[1:], open(os.environ[\"ARGV_OUT\"], \"w\"))' \"$@\"\n"


def run_launcher(tmp_path, d) -> list[str]:
    """Run the rendered launcher with a stand-in `vllm`/`trtllm-serve` that records its argv."""
    files = {f.name: f for f in render_ssh_files(d)}
    for f in files.values():
        (tmp_path / f.name).write_text(f.content)
        os.chmod(tmp_path / f.name, f.mode)
    (tmp_path / "inferry.env").write_text(render_env(ssh_spec(d), {"serving.api_key": "k"}).content)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for exe in ("vllm", "trtllm-serve"):
        (bin_dir / exe).write_text(FAKE_ENGINE)
        os.chmod(bin_dir / exe, 0o755)
    out = tmp_path / "argv.json"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "ARGV_OUT": str(out), "HOME": str(tmp_path)}
    subprocess.run(["sh", str(tmp_path / LAUNCHER)], cwd=tmp_path, env=env, check=True, timeout=30)
    return json.loads(out.read_text())


@pytest.mark.parametrize("weights", HOSTILE)
def test_hostile_weights_path_and_extra_args_reach_the_engine_unchanged(tmp_path, weights):
    extra = ["--chat-template", weights]
    # control characters are refused in model.weights by the config; extra args may still carry them
    model = {"name": "m", "weights": "".join(c for c in weights if c >= " ")}
    d = ssh_deployment({"kind": "vllm", "extra_args": extra}, "process", service_dir=str(tmp_path), model=model)
    spec = ssh_spec(d)
    assert run_launcher(tmp_path, d) == list(spec.argv[1:])
    assert not list(tmp_path.glob("PWNED*")) and spec.args[-1] == weights
    docker = ssh_deployment({"kind": "vllm", "extra_args": extra, "image": "vllm/vllm-openai:${TAG:-v0.33.0}"},
                            "docker", model=model, service_dir=str(tmp_path / "compose"))
    engine = compose_config(tmp_path / "compose", docker)["services"]["engine"]
    # `compose config` prints `$` as `$$` again (its output stays loadable): nothing was interpolated
    assert engine["command"] == [a.replace("$", "$$") for a in ssh_spec(docker).args]
    assert engine["image"] == "vllm/vllm-openai:$${TAG:-v0.33.0}" and "/home/someone" not in json.dumps(engine)


def compose_config(folder, d) -> dict:
    """The compose file as Docker Compose itself reads it (`docker compose config`: interpolation done), with
    variables set that an unescaped `$` would pick up."""
    from tests.support.hosts.docker import compose_plugin

    folder.mkdir(parents=True, exist_ok=True)
    for f in render_ssh_files(d):
        (folder / f.name).write_text(f.content)
    (folder / "inferry.env").write_text("")
    env = {"PATH": "/usr/bin:/bin", "HOME": "/home/someone", "TAG": "latest", "VLLM_API_KEY": "sk-leaked"}
    out = subprocess.run([str(compose_plugin()), "-f", str(folder / COMPOSE), "config", "--format", "json"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("value", HOSTILE + ["/tmp/$(VLLM_API_KEY)", "$$(X) $(", "${HOME}/$HOME"])
def test_kubernetes_passes_values_to_the_container_unchanged(value):
    from infra.stack.stackfile import parse_deployment
    from infra.targets.kubernetes.manifests import objects
    from tests.support.kubernetes_expansion import expand
    from tests.support.kubernetes_stacks import _merge, raw_deployment, spec_of

    raw = _merge(raw_deployment(), {"engine": {"extra_args": ["--chat-template", value]}})
    d = parse_deployment(raw, "hostile")
    (deployment,) = [o for o in objects(d, spec_of(d), "s")
                     if o["kind"] == "Deployment" and not o["metadata"]["name"].endswith("-gateway")]
    (engine,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "engine"]
    env = {e["name"]: "sk-leaked" for e in engine.get("env", [])}
    assert [expand(a, env) for a in engine["args"]][-2:] == ["--chat-template", value]


@pytest.mark.parametrize("draft", HOSTILE)
def test_trtllm_yaml_loads_back_to_the_same_values(draft):
    d = ssh_deployment({"kind": "tensorrt-llm", "speculative": {"method": "draft_model", "num_speculative_tokens": 2,
                                                                 "model": draft},
                        "extra_options": {"otlp_traces_endpoint": draft}}, "docker")
    (f,) = ssh_spec(d).files
    conf = yaml.safe_load(f.content)
    assert conf["speculative_config"]["speculative_model"] == draft and conf["otlp_traces_endpoint"] == draft


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tail=st.text(st.characters(blacklist_categories=["Cs", "Cc"]), min_size=1, max_size=40))
def test_any_weights_path_round_trips_through_shell_and_yaml(tmp_path, tail):
    weights = "/w/" + tail
    d = ssh_deployment({"kind": "vllm"}, "process", service_dir=str(tmp_path), model={"name": "m", "weights": weights})
    assert run_launcher(tmp_path, d) == list(ssh_spec(d).argv[1:])
    assert yaml.safe_load("v: " + quoting.yaml_value(weights))["v"] == weights


def test_hostile_service_dir_refused_and_allowed_characters_kept_in_the_launcher(tmp_path):
    from infra.errors import ConfigError
    from infra.stack.stackfile import parse_deployment

    good = ssh_deployment({"kind": "vllm"}, "docker").model_dump(mode="json", exclude_none=True)
    refused = [("target", field, str(tmp_path / bad)) for field in ("service_dir", "weights_cache")
               for bad in ("$HOME", "it's", 'q"d', "back\\slash", "a:b", "new\nline", "svc dir", "x;y", "x{y}",
                           "x; load_module /tmp/e.so; pid /tmp/p", "x#y", "a|b&c(d)*%n")]
    refused += [("engine", "image", "vllm/vllm-openai:v0.33.0\nx"), ("engine", "image", "a b"),
                ("engine", "extra_args", ["--chat-template", "a\x00b"])]
    for section, field, value in refused:  # each would change meaning in compose, YAML, argv or the shell
        raw = {**good, section: {**good[section], field: value}}
        with pytest.raises(ConfigError) as e:
            parse_deployment(raw, "stack")
        assert e.value.paths == [f"{section}.{field}"], e.value.render()
    service_dir = tmp_path / "svc.dir_@+=,~-"  # every character the allowlist takes
    service_dir.mkdir()
    d = ssh_deployment({"kind": "vllm"}, "process", service_dir=str(service_dir))
    assert run_launcher(service_dir, d)[0] == "serve"


@pytest.mark.parametrize("value,ok", [("plain-Key_1.2+/=", True), ("with space;and|pipe&", True),
                                      ("$(touch x)", False), ("it's", False), ("two\nlines", False),
                                      ("back\\slash", False), ("trailing\n", False)])
def test_env_values_are_quoted_or_refused(tmp_path, value, ok):
    if not ok:
        with pytest.raises(InferryError):
            quoting.env_value("K", value)
        return
    line = f"K={quoting.env_value('K', value)}\n"
    (tmp_path / "e.env").write_text(line)
    got = subprocess.run(["sh", "-c", f'set -a; . {tmp_path}/e.env; printf %s "$K"'], capture_output=True,
                         text=True, check=True).stdout
    assert got == value


@pytest.mark.parametrize("key,why", [("-kXq9" + "a" * 30, "begins with '-'"), ("k" * 20 + " x", "characters other"),
                                     ("k" * 20 + "\n", "characters other"), ("k$(id)", "characters other")])
def test_an_api_key_the_engine_or_proxy_would_misread_is_refused_by_field(key, why):
    from infra.errors import SecretError
    from infra.targets.ssh.render import render_secret_files

    for engine in ({"kind": "vllm"}, {"kind": "sglang"}):
        spec = ssh_spec(ssh_deployment(engine, "docker"))
        with pytest.raises(SecretError) as e:
            render_secret_files(spec, {"serving.api_key": key})
        assert e.value.where == "serving.api_key" and why in e.value.message and key not in e.value.render()
        assert "openssl rand -hex 32" in e.value.fix


def test_a_trailing_newline_never_passes_a_name_check():
    # Python's `$` also matches before a final newline: every anchored check uses fullmatch.
    from infra.errors import InferryError
    from infra.stack.stackfile import _check_name
    from infra.targets.kubernetes.checks import label_key_problem, label_value_problem

    assert label_value_problem("eu\n") and label_key_problem("team\n") and not label_value_problem("eu")
    with pytest.raises(InferryError, match="invalid stack name"):
        _check_name("eu-ssh\n", "STACK")
    with pytest.raises(InferryError):
        quoting.nginx_token("k", "key\n")
