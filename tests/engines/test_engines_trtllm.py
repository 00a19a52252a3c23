"""TensorRT-LLM 1.2: the rendered --config YAML is what the stack says (deep merge, conflicts refused, the
TensorRT backend's KV cache rule), and clients reach the stack's model.name through what trtllm-serve lists."""
from __future__ import annotations

import json

import openai
import pytest
import yaml

from infra.engines import service_spec
from infra.engines.trtllm.extra_options import deep_merge
from infra.stack.validate import findings
from tests.support.standin.process import free_port, start_engine
from tests.engines.test_engines import deployment


def trt(engine: dict, **sections):
    return deployment({"kind": "tensorrt-llm", **engine}, **sections)


def errors(engine: dict, **sections):
    # The base stack's Kubernetes autoscaling reads a vLLM queue gauge: that finding is not these tests' subject.
    return [p for p in findings(trt(engine, **sections)) if p.severity == "error" and not p.path.startswith("target.")]


def rendered_yaml(engine: dict) -> dict:
    (f,) = service_spec(trt(engine)).files
    return yaml.safe_load(f.content)


def test_extra_options_merge_deeply_and_keep_the_typed_fields():
    conf = rendered_yaml({"kv_cache_dtype": "fp8", "enable_block_reuse": False,
                          "extra_options": {"kv_cache_config": {"host_cache_size": 1 << 30}}})
    # Before: extra_options.kv_cache_config replaced the block and dtype / enable_block_reuse vanished.
    assert conf["kv_cache_config"] == {"dtype": "fp8", "enable_block_reuse": False, "host_cache_size": 1 << 30,
                                       "free_gpu_memory_fraction": 0.9}
    assert errors({"kv_cache_dtype": "fp8", "enable_block_reuse": False,
                   "extra_options": {"kv_cache_config": {"host_cache_size": 1 << 30}}}) == []


def test_yaml_kv_block_keeps_the_memory_fraction_its_flag_set():
    # trtllm-serve 1.2 lays the YAML over the flags one top-level key at a time: the block must carry it.
    conf = rendered_yaml({"enable_block_reuse": True, "kv_cache_free_gpu_memory_fraction": 0.8})
    assert conf["kv_cache_config"]["free_gpu_memory_fraction"] == 0.8
    args = service_spec(trt({"enable_block_reuse": True, "kv_cache_free_gpu_memory_fraction": 0.8})).args
    assert args[args.index("--kv_cache_free_gpu_memory_fraction") + 1] == "0.8"


@pytest.mark.parametrize("engine,key,field", [
    ({"kv_cache_dtype": "fp8", "extra_options": {"kv_cache_config": {"dtype": "auto"}}},
     "kv_cache_config.dtype", "engine.kv_cache_dtype"),
    ({"enable_block_reuse": False, "extra_options": {"kv_cache_config": {"enable_block_reuse": True}}},
     "kv_cache_config.enable_block_reuse", "engine.enable_block_reuse"),
    ({"extra_options": {"kv_cache_config": {"free_gpu_memory_fraction": 0.5}}},
     "kv_cache_config.free_gpu_memory_fraction", "engine.kv_cache_free_gpu_memory_fraction"),
    ({"max_batch_size": 64, "extra_options": {"max_batch_size": 128}}, "max_batch_size", "engine.max_batch_size"),
    ({"max_model_len": 8192, "extra_options": {"max_seq_len": 4096}}, "max_seq_len", "engine.max_model_len"),
    ({"enable_chunked_prefill": True, "extra_options": {"enable_chunked_prefill": False}},
     "enable_chunked_prefill", "engine.enable_chunked_prefill"),
    ({"extra_options": {"tensor_parallel_size": 2}}, "tensor_parallel_size", "engine.tensor_parallel_size"),
    ({"speculative": {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3},
      "extra_options": {"speculative_config": {"max_draft_len": 2}}}, "speculative_config", "engine.speculative"),
])
def test_a_typed_field_and_the_same_extra_option_is_one_bullet_naming_both(engine, key, field):
    (p,) = errors(engine)
    assert p.path == "engine.extra_options" and f"engine.extra_options.{key}" in p.message and field in p.message
    assert p.hint == f"remove {key} from engine.extra_options and keep {field}"


def test_extra_options_may_set_what_the_stack_leaves_unset():
    assert errors({"extra_options": {"max_batch_size": 128, "kv_cache_config": {"enable_block_reuse": False}}}) == []


def test_tensorrt_backend_gets_fp8_kv_cache_from_the_build_not_the_yaml():
    d = trt({"backend": "tensorrt", "kv_cache_dtype": "fp8", "enable_block_reuse": True})
    spec = service_spec(d)
    # TrtLlmArgs.validate_kv_cache_dtype refuses kv_cache_config.dtype on this backend: before, it was rendered.
    assert "dtype" not in yaml.safe_load(spec.files[0].content)["kv_cache_config"]
    assert "--kv_cache_dtype fp8" in spec.build.script
    assert errors({"backend": "tensorrt", "kv_cache_dtype": "fp8", "enable_block_reuse": True}) == []


def test_tensorrt_backend_refuses_a_kv_dtype_in_extra_options_with_the_rule_source():
    (p,) = errors({"backend": "tensorrt", "extra_options": {"kv_cache_config": {"dtype": "fp8"}}})
    assert p.path == "engine.extra_options" and "TrtLlmArgs.validate_kv_cache_dtype" in p.message
    assert "KvCacheConfig.dtype is not supported by the TensorRT backend" in p.message
    assert "engine.kv_cache_dtype: fp8" in p.hint
    assert errors({"extra_options": {"kv_cache_config": {"dtype": "fp8"}}}) == []  # the PyTorch backend takes it


def test_deep_merge_leaves_its_inputs_alone():
    base, extra = {"a": {"b": 1}}, {"a": {"c": 2}, "d": 3}
    assert deep_merge(base, extra) == {"a": {"b": 1, "c": 2}, "d": 3} and base == {"a": {"b": 1}}


def test_clients_call_model_name_on_trtllm_serve_which_lists_its_folder(tmp_path):
    # Weights in a folder not named after model.name: trtllm-serve 1.2 lists the folder (OpenAIServer.__init__,
    # model_dir.name); the gate waits for that name, and requests for model.name are answered.
    model_dir = tmp_path / "l8b"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    d = trt({"max_model_len": 32768})
    spec = service_spec(d, str(model_dir))
    assert spec.served_model_name == "l8b" and d.model.name == "llama-3.1-8b-instruct"
    args = list(spec.args)
    args[args.index("--port") + 1] = str(free_port())
    eng = start_engine(args, tmp_path / "trt.log", program="trtllm-serve")
    try:
        client = openai.OpenAI(base_url=f"{eng.base_url}/v1", api_key="unused")
        (listed,) = client.models.list().data
        assert listed.id == spec.served_model_name and listed.owned_by == "tensorrt_llm"
        reply = client.chat.completions.create(model=d.model.name, messages=[{"role": "user", "content": "ping"}])
        assert reply.model == d.model.name and reply.choices[0].message.content == "stand-in reply to: ping"
    finally:
        eng.stop()


def test_vllm_standin_still_refuses_a_model_it_does_not_serve(tmp_path):
    model_dir = tmp_path / "llama"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    spec = service_spec(deployment({"kind": "vllm", "max_model_len": 32768}), str(model_dir))
    args = list(spec.args)
    args[args.index("--port") + 1] = str(free_port())
    eng = start_engine(["serve", *args], tmp_path / "v.log", env={"VLLM_API_KEY": "k"})
    try:
        client = openai.OpenAI(base_url=f"{eng.base_url}/v1", api_key="k")
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="l8b", messages=[{"role": "user", "content": "x"}])
    finally:
        eng.stop()
