"""Targets plug in like engines: a throwaway third target, one folder in a temporary package and one line in the
registry, validates, renders and is offered by `inferry init --target`; each target's component args keep the
keys of the model that checks them."""
from __future__ import annotations

import json
import sys
import typing

import pytest
import yaml

from infra.checks import register_checks
from infra.stack.config import Deployment
from infra.targets import registry

TARGET_MODULE = '''"""A throwaway target: a machine named in the stack, the engine rendered as JSON for it."""
from __future__ import annotations

import json
from typing import Literal

from infra.stack.config_targets import TargetBase


class BareTarget(TargetBase):
    """One bare machine."""

    kind: Literal["bare"]
    machine: str

    @property
    def instances(self) -> int:
        return 1


class Bare:
    kind = "bare"
    config = BareTarget
    starter = "kind: bare\\nmachine: box-1                        # the one machine\\n"

    def deploy(self, req):
        return {"endpoint": f"http://{req.deployment.target.machine}:8000/v1", "endpoints": []}

    def checks(self, d):
        return []

    def service_spec(self, d):
        from infra.engines import service_spec

        return service_spec(d)

    def placements(self, stack):
        from infra.render.out import Placed

        spec = self.service_spec(stack.deployment)
        text = json.dumps({"command": list(spec.command), "args": list(spec.args)}, indent=1)
        return [Placed("engine.json", text, 0o644, (stack.deployment.target.machine,), "/etc/bare/engine.json")]

    def summary(self, d):
        return f"machine {d.target.machine}"

    def replicas_behind(self, d):
        return 1

    def host_status(self, stack, resolve):
        return []

    def run_time_sources(self, d):
        return []


TARGET = Bare()
'''


@pytest.fixture
def third_target(tmp_path, monkeypatch):
    """A package `tmptargets` beside the tests, its target listed in the registry (one line), the schema rebuilt."""
    pkg = tmp_path / "pkg" / "tmptargets"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "bare.py").write_text(TARGET_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))
    monkeypatch.setattr(registry, "MODULES", registry.MODULES + ("tmptargets.bare",))
    register_checks()
    Deployment.model_rebuild(force=True)
    yield
    monkeypatch.undo()
    sys.modules.pop("tmptargets.bare", None)
    sys.modules.pop("tmptargets", None)
    register_checks()
    Deployment.model_rebuild(force=True)


def test_a_third_target_validates_renders_and_is_offered_by_init(third_target, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INFERRY_API_KEY", "k" * 32)
    stack = tmp_path / "stacks" / "Pulumi.box.yaml"
    made = cli("init", str(stack), "--target", "bare", "--engine", "vllm")
    assert made.exit_code == 0, made.output
    assert yaml.safe_load(stack.read_text())["config"]["inferry:deployment"]["target"] == {"kind": "bare",
                                                                                          "machine": "box-1"}
    checked = cli("validate", str(stack))
    assert checked.exit_code == 0 and "on machine box-1" in checked.output, checked.output
    out = cli("render", str(stack), "--out", str(tmp_path / "out"))
    assert out.exit_code == 0, out.output
    engine = json.loads((tmp_path / "out" / "engine.json").read_text())
    assert engine["command"] == ["vllm", "serve"] and "--served-model-name" in engine["args"]
    wrong = cli("init", str(tmp_path / "stacks" / "Pulumi.x.yaml"), "--target", "bear")
    assert wrong.exit_code == 1 and "use --target ssh or kubernetes or bare" in wrong.output


def test_an_unknown_target_kind_names_the_registered_ones(third_target, cli, tmp_path):
    stack = tmp_path / "Pulumi.box.yaml"
    assert cli("init", str(stack), "--target", "bare").exit_code == 0
    stack.write_text(stack.read_text().replace("kind: bare", "kind: baer"))
    bad = cli("validate", str(stack))
    assert bad.exit_code == 1 and "target" in bad.output and "bare" in bad.output, bad.output


@pytest.mark.parametrize("module,args,model", [
    ("infra.targets.ssh.config", "SshTargetArgs", "SshTarget"),
    ("infra.targets.ssh.config", "SshHostArgs", "SshHost"),
    ("infra.gateway.config", "GatewayArgs", "Gateway"),
    ("infra.gateway.config", "AcmeArgs", "Acme"),
    ("infra.targets.kubernetes.config", "KubernetesTargetArgs", "KubernetesTarget"),
])
def test_component_args_have_the_keys_of_the_model_that_checks_them(module, args, model):
    import importlib

    m = importlib.import_module(module)
    typed, section = getattr(m, args), getattr(m, model)
    assert set(typing.get_type_hints(typed, include_extras=False, localns=vars(m) | {"pulumi": _Pulumi})) \
        == set(section.model_fields)
    required = {k for k, f in section.model_fields.items() if f.is_required()}
    # String annotations (the module's `from __future__ import annotations`): Required is in their text.
    text = {k: getattr(a, "__forward_arg__", str(a)) for k, a in typed.__annotations__.items()}
    assert {k for k, a in text.items() if a.startswith("Required[")} == required


class _Pulumi:
    """Stands for the SDK module in the TypedDicts' string annotations (pulumi.Input[str])."""

    Input = typing.Optional
