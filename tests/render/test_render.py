"""Rendered files: golden for the bundled stacks, valid for compose, byte-identical re-renders."""
from __future__ import annotations

import json
import os

import jsonschema
import pytest
import yaml

from cli.render import rendered_files
from infra.engines.options import check_args
from infra.targets.kubernetes.manifests import render_kubernetes
from infra.render.service import service_json
from infra.targets.ssh.render import (COMPOSE, ENV, redacted_values, render_env, render_secret_files,
                                      render_ssh_files, ssh_spec)
from infra.stack.stackfile import load_stack
from tests.conftest import ROOT, STACKS
from tests.engines.test_engines import BASE, deployment

GOLDEN = ROOT / "tests" / "golden"
UPDATE = os.environ.get("INFERRY_UPDATE_GOLDEN") == "1"  # regenerate: INFERRY_UPDATE_GOLDEN=1 pytest tests/render/test_render.py
COMPOSE_SCHEMA = json.loads((ROOT / "tests/schemas/compose-spec.json").read_text())


def golden_files(stack_file) -> dict[str, str]:
    s = load_stack(str(stack_file))
    files = {f.name: f.content for f in rendered_files(s)}
    spec = ssh_spec(s) if s.deployment.target.kind == "ssh" else __import__("infra.engines").engines.service_spec(s.deployment)
    files["service.json"] = json.dumps(service_json(spec), indent=2, sort_keys=True) + "\n"
    return files


@pytest.mark.parametrize("stack_file", STACKS, ids=lambda p: p.stem)
def test_golden_files(stack_file):
    folder = GOLDEN / stack_file.stem.removeprefix("Pulumi.")
    files = golden_files(stack_file)
    if UPDATE:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (folder / name).write_text(text)
    assert sorted(p.name for p in folder.iterdir()) == sorted(files), "run with INFERRY_UPDATE_GOLDEN=1 to refresh"
    for name, text in files.items():
        assert (folder / name).read_text() == text, f"{folder.name}/{name} differs from the golden file"


@pytest.mark.parametrize("stack_file", STACKS, ids=lambda p: p.stem)
def test_rerender_is_byte_identical_and_vllm_argv_accepted(stack_file):
    assert golden_files(stack_file) == golden_files(stack_file)
    spec = json.loads(golden_files(stack_file)["service.json"])
    assert check_args(spec["engine"], spec["version"], spec["args"]) == []


def test_cli_render_writes_files_with_modes(cli, tmp_path):
    result = cli("render", str(STACKS[1]), "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert (tmp_path / ENV).stat().st_mode & 0o777 == 0o600
    assert (tmp_path / COMPOSE).stat().st_mode & 0o777 == 0o644
    result = cli("render", str(STACKS[1]), "--json")
    assert json.loads(result.stdout)["env"]["VLLM_API_KEY"]["secret"] == "serving.api_key"
    assert cli("render", str(STACKS[1])).exit_code == 1


def test_kubernetes_hook_renders_manifests_for_kubernetes_stacks_only():
    assert any("-deployment-" in name for name in render_kubernetes(load_stack(str(STACKS[0]))))
    assert render_kubernetes(load_stack(str(STACKS[1]))) == {}


VARIANTS = [
    ({"kind": "vllm"}, "docker"), ({"kind": "vllm", "load_format": "runai_streamer"}, "docker"),
    ({"kind": "tensorrt-llm", "kv_cache_dtype": "fp8"}, "docker"),
    ({"kind": "tensorrt-llm", "backend": "tensorrt", "build": {}}, "docker"),
    ({"kind": "vllm"}, "process"), ({"kind": "tensorrt-llm", "enable_chunked_prefill": True}, "process"),
]


def ssh_deployment(engine: dict, runtime: str, service_dir: str = "/etc/inferry", **sections):
    target = {**BASE_SSH["target"], "runtime": runtime, "service_dir": service_dir}
    return deployment(engine, target=target, **sections)


BASE_SSH = load_stack(str(STACKS[1])).deployment.model_dump(mode="json", exclude_none=True)


@pytest.mark.parametrize("engine,runtime", VARIANTS, ids=lambda v: v if isinstance(v, str) else ",".join(v.values()) if all(isinstance(x, str) for x in v.values()) else v["kind"])
def test_compose_files_match_the_compose_spec(engine, runtime):
    d = ssh_deployment(engine, runtime)
    files = {f.name: f for f in render_ssh_files(d)}
    if runtime == "docker":
        doc = yaml.safe_load(files[COMPOSE].content)
        jsonschema.Draft201909Validator(COMPOSE_SCHEMA).validate(doc)
        assert doc["services"]["engine"]["command"] == list(ssh_spec(d).args)
    for f in render_secret_files(ssh_spec(d), redacted_values(ssh_spec(d))):
        assert f.mode == 0o600


def test_compose_schema_check_can_fail():
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft201909Validator(COMPOSE_SCHEMA).validate({"services": {"engine": {"ports": "8000"}}})


def test_env_file_needs_every_secret_and_keeps_values():
    spec = ssh_spec(ssh_deployment({"kind": "vllm", "load_format": "runai_streamer"}, "docker"))
    with pytest.raises(Exception, match="serving.api_key|storage"):
        render_env(spec, {})
    values = {"serving.api_key": "sk-abc/DEF+1=", "storage.access_key_id": "AKIA1",
              "storage.secret_access_key": "s3 cret with spaces"}
    text = render_env(spec, values).content
    assert "VLLM_API_KEY=sk-abc/DEF+1=\n" in text and "AWS_SECRET_ACCESS_KEY='s3 cret with spaces'\n" in text
