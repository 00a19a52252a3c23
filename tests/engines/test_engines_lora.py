"""model.adapters from the stack to the engines: validated, rendered per engine from typed Python (the flags
checked against each pinned engine's option snapshot), fetched beside the model, sized, and one owner of the
LoRA flags."""
from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from infra.engines import options, service_spec
from infra.engines.checks import engine_checks
from infra.sizing.catalog import find_model
from infra.sizing.lora import adapter_bytes
from infra.sizing.fit import plan_with_fixes
from infra.sizing.plan import make_plan
from tests.engines.test_engines import BASE, deployment

pytestmark = pytest.mark.lora

TWO = [{"name": "sql", "weights": "adapters/sql-lora", "rank": 16}, {"name": "chat", "weights": "adapters/chat",
                                                                     "rank": 4}]


def with_adapters(engine: dict, adapters=TWO, **model):
    """The first bundled stack with these adapters on its model and this engine."""
    return deployment(engine, model={**BASE["model"], "adapters": adapters, **model})


def paths(errors: ValidationError) -> list[str]:
    return [".".join(map(str, e["loc"])) for e in errors.errors()]


@pytest.mark.parametrize("adapters, where", [
    ([{"name": "sql", "weights": "a/sql", "rank": 8}, {"name": "sql", "weights": "a/two", "rank": 8}], "model"),
    ([{"name": BASE["model"]["name"], "weights": "a/sql", "rank": 8}], "model"),
    ([{"name": "sql", "weights": "/opt/adapters/sql", "rank": 8}], "model.adapters.0.weights"),
    ([{"name": "sql", "weights": "a/../../etc", "rank": 8}], "model.adapters.0.weights"),
    ([{"name": "sql", "weights": "a/sql\nhttp://evil", "rank": 8}], "model.adapters.0.weights"),
    ([{"name": "sql", "weights": "a/sql", "rank": 0}], "model.adapters.0.rank"),
    ([{"name": "sql x", "weights": "a/sql", "rank": 8}], "model.adapters.0.name"),
])
def test_the_stack_refuses_adapters_that_cannot_be_served(adapters, where):
    with pytest.raises(ValidationError) as e:
        with_adapters({"kind": "vllm"}, adapters)
    assert paths(e.value)[0] == where


def test_vllm_renders_each_adapter_with_its_base_model_and_the_rank_limit_above_the_largest():
    d = with_adapters({"kind": "vllm"})
    spec = service_spec(d)
    assert options.check_args("vllm", spec.version, spec.args) == []
    ns = options.parse("vllm", spec.version, spec.args)
    mods = [json.loads(m) for m in ns.lora_modules]
    assert mods == [{"name": "sql", "path": "/models/adapters/sql-lora", "base_model_name": d.model.name},
                    {"name": "chat", "path": "/models/adapters/chat", "base_model_name": d.model.name}]
    assert (ns.enable_lora, ns.max_loras, ns.max_lora_rank, ns.max_cpu_loras) == (True, 2, 16, 2)
    # fetched and verified like the model, beside it
    assert spec.extra_weights == (("s3://inferry-weights/adapters/sql-lora", "/models/adapters/sql-lora"),
                                  ("s3://inferry-weights/adapters/chat", "/models/adapters/chat"))


def test_a_rank_between_vllm_limits_gets_the_next_one_up_and_slots_cap_the_gpu_copies():
    d = with_adapters({"kind": "vllm"}, [{"name": "a", "weights": "a/a", "rank": 4},
                                         {"name": "b", "weights": "a/b", "rank": 40}], adapter_slots=1)
    ns = options.parse("vllm", d.engine.version, service_spec(d).args)
    assert (ns.max_lora_rank, ns.max_loras, ns.max_cpu_loras) == (64, 1, 2)  # vLLM's limits: ... 32, 64, ...


def test_sglang_renders_name_equals_path_and_the_adapters_per_batch():
    spec = service_spec(with_adapters({"kind": "sglang"}))
    assert options.check_args("sglang", spec.version, spec.args) == []
    ns = options.parse("sglang", spec.version, spec.args)
    assert ns.lora_paths == ["sql=/models/adapters/sql-lora", "chat=/models/adapters/chat"]
    assert (ns.enable_lora, ns.max_loras_per_batch, ns.max_lora_rank) == (True, 2, 16)


def test_no_adapters_render_no_lora_flag():
    for kind in ("vllm", "sglang"):
        assert not [a for a in service_spec(deployment({"kind": kind})).args if "lora" in a]


def errors(d) -> list[tuple[str, str]]:
    return [(p.path, p.message) for p in engine_checks(d) if p.severity == "error"]


def test_a_rank_vllm_refuses_names_the_adapter_and_nothing_else():
    found = errors(with_adapters({"kind": "vllm"}, [{"name": "big", "weights": "a/big", "rank": 1024}]))
    assert [p for p, _ in found] == ["model.adapters[0].rank"]
    assert "'big' has rank 1024" in found[0][1] and "up to 512" in found[0][1]
    assert errors(with_adapters({"kind": "sglang"}, [{"name": "big", "weights": "a/big", "rank": 1024}])) == []


def test_lora_flags_in_extra_args_are_refused_beside_model_adapters_and_allowed_without():
    for kind, flags in (("vllm", ["--max-loras", "8", "--enable-lora"]), ("sglang", ["--max-loras-per-batch", "8"])):
        found = errors(with_adapters({"kind": kind, "extra_args": flags}))
        assert found and all(p == "engine.extra_args" and "model.adapters" in m for p, m in found), found
        assert {m.split()[0] for _, m in found} == {f for f in flags if f.startswith("--")}
        assert errors(deployment({"kind": kind, "extra_args": flags})) == []


def test_tensorrt_llm_and_a_streamed_model_refuse_adapters_with_the_reason():
    (trt,) = errors(with_adapters({"kind": "tensorrt-llm"}))
    assert trt[0] == "model.adapters" and "TensorRT-LLM" in trt[1]
    (streamed,) = errors(with_adapters({"kind": "vllm", "load_format": "runai_streamer"}))
    assert streamed[0] == "model.adapters" and "runai_streamer" in streamed[1]


def test_the_adapter_slots_take_their_memory_from_the_kv_cache():
    plain = make_plan(deployment({"kind": "vllm"}))
    two = make_plan(with_adapters({"kind": "vllm"}))
    arch = find_model(BASE["model"]["name"])
    # Llama-3.1-8B: per layer 3h + (q + 2kv) + q + h + 2h + 2I + I + h = 81,920 elements per rank unit per slot
    assert adapter_bytes(arch, 1, 1, 2) == 32 * 81920 * 2
    assert two.verdict.budget.adapters == 2 * 16 * 32 * 81920 * 2
    assert plain.verdict.budget.kv - two.verdict.budget.kv == two.verdict.budget.adapters
    assert two.verdict.kv_capacity_tokens < plain.verdict.kv_capacity_tokens
    assert two.lora == "2 slot(s) at rank 16" and plain.lora == ""
    # under tensor parallelism each GPU keeps A of column-parallel and B of row-parallel layers whole
    assert adapter_bytes(arch, 1, 1, 2, tp=2) > adapter_bytes(arch, 1, 1, 2) / 2


def test_when_the_slots_do_not_fit_the_fix_is_fewer_slots():
    many = [{"name": f"a{i}", "weights": f"a/{i}", "rank": 512} for i in range(24)]
    p = plan_with_fixes(with_adapters({"kind": "vllm", "max_model_len": 131072}, many,
                                      **{"weights": BASE["model"]["weights"]}))
    assert not p.verdict.fits and "adapter slots" in p.verdict.reason
    assert any(f.field == "model.adapter_slots" and f.value == 1 for f in p.fixes), p.fixes
