"""engine.extra_options values against the types TensorRT-LLM 1.2.1's --config classes declare."""
from __future__ import annotations

import ast
import sys
import textwrap

import pytest

from infra.engines.options import snapshot
from tests.conftest import ROOT
from tests.engines.test_engines_trtllm import errors


def bullets(options: dict, **engine) -> list[str]:
    return [p.render() for p in errors({"extra_options": options, **engine}) if p.path.startswith("engine.extra")]


@pytest.mark.parametrize("options, expected", [
    ({"max_batch_size": "lots"}, "engine.extra_options.max_batch_size: expected a whole number (found 'lots'); "
     "set it as TensorRT-LLM 1.2.1's TorchLlmArgs.max_batch_size takes it, or remove it"),
    ({"max_batch_size": "64"}, "engine.extra_options.max_batch_size: expected a whole number (found '64'); "
     "write 64 without quotes"),
    ({"max_batch_size": 8.5}, "engine.extra_options.max_batch_size: expected a whole number (found 8.5)"),
    ({"print_iter_log": "yes"}, "engine.extra_options.print_iter_log: expected true or false (found 'yes'); "
     "write true or false, unquoted"),
    ({"enable_autotuner": 1}, "engine.extra_options.enable_autotuner: expected true or false (found 1)"),
    ({"attn_backend": 5}, "engine.extra_options.attn_backend: expected a string (found 5)"),
    ({"allreduce_strategy": "nccl"}, "engine.extra_options.allreduce_strategy: expected one of 'AUTO', 'NCCL', "),
    ({"pp_partition": 3}, "engine.extra_options.pp_partition: expected a list of whole numbers (found 3)"),
    ({"cp_config": "x"}, "engine.extra_options.cp_config: expected a mapping (CpConfig) (found 'x')"),
])
def test_a_value_of_the_wrong_type_is_one_bullet(options, expected):
    [msg] = bullets(options)
    assert msg.startswith(expected), msg


@pytest.mark.parametrize("options, expected", [
    ({"kv_cache_config": {"max_tokens": 1.5}}, "engine.extra_options.kv_cache_config.max_tokens: expected a "
     "whole number (found 1.5); set it as TensorRT-LLM 1.2.1's KvCacheConfig.max_tokens takes it, or remove it"),
    ({"scheduler_config": {"capacity_scheduler_policy": "MAX_UTILISATION"}},
     "engine.extra_options.scheduler_config.capacity_scheduler_policy: expected one of 'MAX_UTILIZATION', "
     "'GUARANTEED_NO_EVICT', 'STATIC_BATCH' (found 'MAX_UTILISATION'); did you mean 'MAX_UTILIZATION'?"),
    ({"scheduler_config": {"dynamic_batch_config": {"enable_batch_size_tuning": 3}}},
     "engine.extra_options.scheduler_config.dynamic_batch_config.enable_batch_size_tuning: expected true or false "
     "(found 3); set it as TensorRT-LLM 1.2.1's DynamicBatchConfig.enable_batch_size_tuning takes it"),
    ({"cuda_graph_config": {"batch_sizes": [1, "2", 4]}},
     "engine.extra_options.cuda_graph_config.batch_sizes[1]: expected a whole number (found '2'); write 2 without"),
    ({"moe_config": {"backend": "cutlass"}}, "engine.extra_options.moe_config.backend: expected one of 'AUTO', "),
    ({"scheduler_config": {"polcy": 1}}, "engine.extra_options.scheduler_config.polcy: unknown key (TensorRT-LLM "
     "1.2.1 SchedulerConfig); SchedulerConfig keys: capacity_scheduler_policy, context_chunking_policy"),
    ({"torch_compile_config": {"enable_fullgrph": True}}, "engine.extra_options.torch_compile_config."
     "enable_fullgrph: unknown key (TensorRT-LLM 1.2.1 TorchCompileConfig); did you mean 'enable_fullgraph'?"),
])
def test_nested_config_classes_are_checked_too(options, expected):
    [msg] = bullets(options)
    assert msg.startswith(expected), msg
    assert "did you mean 'CUTLASS'?" in msg if "cutlass" in str(options) else True


def test_values_of_the_right_type_pass():
    assert bullets({"max_num_tokens": 4096, "print_iter_log": True, "attn_backend": "TRTLLM",
                    "cuda_graph_config": {"enable_padding": True, "batch_sizes": [1, 2, 4]},
                    "scheduler_config": {"capacity_scheduler_policy": "MAX_UTILIZATION",
                                         "context_chunking_policy": None},
                    "kv_cache_config": {"max_tokens": 10000, "max_attention_window": [4096]},
                    "moe_config": {"backend": "CUTLASS", "load_balancer": {"num_slots": 8}},
                    "batch_wait_timeout_ms": 5, "env_overrides": {"A": 1}, "load_format": "dummy",
                    "cuda_graph_config_unused": None}) == \
        ["engine.extra_options: tensorrt-llm 1.2.1 --config: unknown key 'cuda_graph_config_unused' for the "
         "pytorch backend"]


def test_the_tensorrt_backend_checks_trtllmargs():
    assert bullets({"max_batch_size": 8, "normalize_log_probs": True, "batching_type": "INFLIGHT",
                    "calib_config": {"calib_batches": 16}}, backend="tensorrt") == []
    [msg] = bullets({"batching_type": "inflight"}, backend="tensorrt")
    assert msg.endswith("(found 'inflight'); did you mean 'INFLIGHT'?")


def test_the_snapshot_records_the_types_of_every_reachable_class():
    types = snapshot("tensorrt-llm", "1.2.1")["yaml"]["types"]
    yaml_keys = snapshot("tensorrt-llm", "1.2.1")["yaml"]
    for cls in ("TorchLlmArgs", "TrtLlmArgs", "KvCacheConfig"):
        assert sorted(types[cls]) == yaml_keys[cls], cls
    assert types["TorchLlmArgs"]["max_batch_size"] == {"anyOf": ["int", "null"]}
    assert types["TorchLlmArgs"]["speculative_config"] == "any"  # its own check, by decoding_type
    assert {"SchedulerConfig", "DynamicBatchConfig", "CudaGraphConfig", "MoeConfig", "CalibConfig"} <= set(types)


LLM_ARGS = '''
    Backend = Literal['a', 'b']

    class Policy(StrEnum):
        FAST = "FAST"

    class Inner(StrictBaseModel):
        policy: Policy = Field(default=Policy.FAST)
        sizes: Optional[List[PositiveInt]] = None

    class TorchLlmArgs(StrictBaseModel):
        inner: Optional[Inner] = None
        backend: Backend = 'a'
        ratio: NonNegativeFloat = 0
        table: Dict[str, int] = {}
        either: Union[Inner, OtherInner] = None
        coerced: int = 0
        tokenizer: Optional[Union[str, Path, TokenizerBase]] = None

        @field_validator("coerced", mode="before")
        @classmethod
        def up(cls, v):
            return v
'''


def test_snapshot_trtllm_reads_field_types_from_source():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import snapshot_trtllm as s
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    types = s.field_types(ast.parse(textwrap.dedent(LLM_ARGS)), ["TorchLlmArgs"])
    assert types["TorchLlmArgs"] == {
        "backend": {"enum": ["a", "b"]}, "coerced": "any", "either": "any",  # OtherInner: not in the file
        "inner": {"anyOf": [{"model": "Inner"}, "null"]}, "ratio": "float", "table": {"dict": "int"},
        "tokenizer": "any"}
    assert types["Inner"] == {"policy": {"enum": ["FAST"]}, "sizes": {"anyOf": [{"list": "int"}, "null"]}}
