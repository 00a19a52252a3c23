"""The Engine contract: every engine is a registered descriptor, and nothing outside infra/engines/ branches on
which engine it is."""
from __future__ import annotations

import ast
import dataclasses
import typing
from pathlib import Path

import pytest

from infra.engines import options
from infra.engines.contract import Engine, KvShare, SizingModel
from infra.engines.registry import ENGINES, engine_for, kinds
from infra.errors import InferryError
from infra.sizing import memory
from infra.stack.kinds import engine_kinds, engine_sections
from tests.engines.test_engines import deployment

ROOT = Path(__file__).resolve().parents[2]
ENGINE_CLASSES = {"VllmEngine", "TrtllmEngine"}
# The schema defines the engine sections and their tags; engines/ is where an engine may know itself.
ALLOWED = ("infra/engines/", "infra/stack/config.py", "infra/stack/config_engines.py", "infra/stack/kinds.py")


def _sources() -> list[tuple[str, ast.AST]]:
    files = [*(ROOT / "infra").rglob("*.py"), *(ROOT / "cli").rglob("*.py")]
    rel = [(p.relative_to(ROOT).as_posix(), p) for p in files]
    return [(r, ast.parse(p.read_text(encoding="utf-8"))) for r, p in rel if not r.startswith(ALLOWED)]


def _engine_branches(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(ast.unparse(x).endswith("engine.kind")
                                                 for x in (node.left, *node.comparators)):
            found.append(ast.unparse(node))
        elif isinstance(node, ast.Call) and ast.unparse(node.func) == "isinstance" and \
                ENGINE_CLASSES & {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}:
            found.append(ast.unparse(node))
        elif isinstance(node, ast.ImportFrom) and ENGINE_CLASSES & {a.name for a in node.names}:
            found.append(ast.unparse(node))
        elif isinstance(node, ast.Constant) and node.value in engine_kinds():
            found.append(repr(node.value))
    return found


def test_nothing_outside_engines_branches_on_the_engine():
    found = {path: hits for path, tree in _sources() if (hits := _engine_branches(tree))}
    assert found == {}, "ask the engine's descriptor (engine_for(kind)) or a ServiceSpec field instead"


def test_every_engine_descriptor_has_every_field():
    for engine in ENGINES:
        for cls, obj in ((Engine, engine), (SizingModel, engine.sizing)):
            for f in dataclasses.fields(cls):
                value = getattr(obj, f.name)
                assert value is not None or f.name in ("metrics", "lora"), f"{engine.kind}: {f.name}"
                if "Callable" in str(f.type):
                    assert callable(value), f"{engine.kind}: {f.name}"
        assert (engine.lora is None) == bool(engine.lora_refusal), f"{engine.kind}: LoRA, or why not"
        assert engine.config.model_fields["kind"].annotation == typing.Literal[engine.kind]
        version = engine.config.model_fields["version"].default
        assert options.snapshot(engine.kind, version), engine.kind
        assert engine.sizing.kv_share_of in typing.get_args(KvShare) == typing.get_args(memory.KvShare)


def test_the_registry_the_schema_and_the_stack_kinds_agree():
    union_tags = tuple(typing.get_args(m.model_fields["kind"].annotation)[0] for m in engine_sections())
    assert kinds() == engine_kinds() == union_tags
    assert [e.config for e in ENGINES] == list(engine_sections())


def test_the_registry_refuses_an_unknown_kind_with_a_did_you_mean():
    assert engine_for("vllm").kind == "vllm"
    with pytest.raises(InferryError) as e:
        engine_for("tensorrt_llm")
    text = e.value.render()
    assert "unknown engine.kind 'tensorrt_llm'" in text and "did you mean 'tensorrt-llm'?" in text
    assert all(k in text for k in kinds())


@pytest.mark.parametrize("kind", kinds())
def test_the_service_spec_carries_what_targets_ask(kind):
    engine = engine_for(kind)
    spec = engine.service_spec(deployment({"kind": kind}))
    assert spec.engine == kind and spec.image == engine.image.format(version=spec.version)
    assert spec.cuda_requirement == engine.cuda and spec.queue_metric == engine.queue_metric
    assert spec.needs_auth_proxy == engine.needs_auth_proxy and spec.health_path == engine.health_path
    listed = spec.served_model_name == spec.model_dir.rstrip("/").rsplit("/", 1)[-1]
    assert listed if engine.lists_model_as == "folder" else spec.served_model_name == "llama-3.1-8b-instruct"
