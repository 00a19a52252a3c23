"""Engines: every rendered command line and YAML is one the pinned engine version accepts."""
from __future__ import annotations

import json

import pytest
import yaml

from infra.stack.config import Deployment
from infra.engines import service_spec
from infra.engines.options import check_args, check_yaml, parser
from infra.stack.stackfile import load_stack
from tests.conftest import STACKS

BASE = load_stack(str(STACKS[0])).deployment.model_dump(mode="json", exclude_none=True)


def deployment(engine: dict, **sections) -> Deployment:
    """The first bundled stack with its engine (and any other section) replaced."""
    return Deployment.model_validate({**BASE, "engine": engine, **sections})


@pytest.mark.parametrize("stack_file", STACKS, ids=lambda p: p.stem)
def test_bundled_stack_argv_accepted_by_vllm_snapshot(stack_file):
    d = load_stack(str(stack_file)).deployment
    spec = service_spec(d)
    assert spec.command == ("vllm", "serve")
    assert check_args("vllm", spec.version, spec.args) == []
    ns = parser("vllm", spec.version).parse_args(list(spec.args))
    assert ns.model_tag == spec.model_dir and ns.max_model_len == 32768 and ns.enable_prefix_caching is True


def test_api_key_reaches_vllm_through_env_never_argv():
    spec = service_spec(deployment({"kind": "vllm"}))
    (key,) = [e for e in spec.env if e.name == "VLLM_API_KEY"]
    assert key.secret is not None and key.value is None and key.secret_field == "serving.api_key"
    assert not any("api-key" in a or "apiKey" in a for a in spec.argv)


def test_runai_streamer_reads_s3_with_keys_by_reference():
    spec = service_spec(deployment({"kind": "vllm", "load_format": "runai_streamer"}))
    env = {e.name: e for e in spec.env}
    # the stream reads the model's prefix inside this stack's own bucket
    assert spec.streams_weights and spec.args[0] == f"s3://{BASE['storage']['bucket']}/{BASE['model']['weights']}"
    assert env["RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING"].value == "0"
    assert env["AWS_EC2_METADATA_DISABLED"].value == "true"
    assert env["AWS_ENDPOINT_URL"].value == BASE["storage"]["endpoint"]
    assert env["AWS_SECRET_ACCESS_KEY"].secret is not None and env["AWS_SECRET_ACCESS_KEY"].value is None
    assert check_args("vllm", "0.33.0", spec.args) == []


def test_model_dir_from_target_is_the_positional_model():
    spec = service_spec(deployment({"kind": "vllm"}), model_dir="/var/lib/inferry/weights/llama")
    assert spec.args[0] == "/var/lib/inferry/weights/llama" and "--model" not in spec.args


VLLM_MATRIX = [
    {"quantization": q} for q in ("fp8", "awq", "awq_marlin", "gptq", "gptq_marlin", "compressed-tensors",
                                  "modelopt", "modelopt_fp4", "mxfp4")
] + [
    {"kv_cache_dtype": k} for k in ("fp8", "fp8_e4m3", "fp8_e5m2")
] + [
    {"enable_prefix_caching": False, "enable_chunked_prefill": True, "block_size": 32},
    {"enable_chunked_prefill": False, "max_num_batched_tokens": 8192, "max_num_seqs": 64},
    {"tensor_parallel_size": 2, "pipeline_parallel_size": 2, "dtype": "bfloat16"},
    {"load_format": "safetensors", "gpu_memory_utilization": 0.85},
    {"speculative": {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}},
    {"speculative": {"method": "draft_model", "num_speculative_tokens": 3, "model": "s3://inferry-weights/draft"}},
    {"speculative": {"method": "eagle", "num_speculative_tokens": 3, "model": "yuhuili/EAGLE-LLaMA3.1-8B"}},
    {"speculative": {"method": "eagle3", "num_speculative_tokens": 3, "model": "/opt/eagle3"}},
    {"speculative": {"method": "mtp", "num_speculative_tokens": 1}},
    {"extra_args": ["--enforce-eager", "--max-logprobs", "10", "--disable-log-stats"]},
]


@pytest.mark.parametrize("options", VLLM_MATRIX, ids=lambda o: ",".join(f"{k}" for k in o))
def test_vllm_option_matrix_accepted_by_snapshot(options):
    spec = service_spec(deployment({"kind": "vllm", **options}, provider={**BASE["provider"], "gpu_count": 4}))
    assert check_args("vllm", "0.33.0", spec.args) == []


def test_speculative_config_is_json_with_draft_in_models_dir():
    spec = service_spec(deployment({"kind": "vllm", "speculative": {
        "method": "draft_model", "num_speculative_tokens": 3, "model": "s3://inferry-weights/draft-1b"}}))
    conf = json.loads(spec.args[spec.args.index("--speculative-config") + 1])
    assert conf == {"method": "draft_model", "model": "/models/draft-1b", "num_speculative_tokens": 3}
    assert spec.extra_weights == (("s3://inferry-weights/draft-1b", "/models/draft-1b"),)


@pytest.mark.parametrize("argv,needle", [
    (["m", "--no-such-flag"], "--no-such-flag"),
    (["m", "--max-num-seqs", "many"], "max-num-seqs"),
    (["m", "--dtype", "bf16"], "bf16"),
    (["m", "--quantization", "bitsandbytes"], "bitsandbytes"),  # not a vLLM 0.33 method
    (["m", "--speculative-config", "{not json"], "speculative-config"),
    (["m", "--speculative-config", '{"method":"ngram","lookup":4}'], "lookup"),
    (["m", "--max-num", "4"], "ambiguous option --max-num"),  # argparse refuses a prefix of several options
    (["m", "--max-num-sqs", "4"], "did you mean --max-num-seqs"),
])
def test_check_args_refuses_what_vllm_refuses(argv, needle):
    problems = check_args("vllm", "0.33.0", argv)
    assert problems and needle in " ".join(problems)


def test_unknown_version_is_a_problem_not_a_crash():
    assert "no option snapshot" in check_args("vllm", "0.1.0", ["m"])[0]


def trt(engine: dict) -> Deployment:
    return deployment({"kind": "tensorrt-llm", **engine})


TRT_MATRIX = [
    {},
    {"max_batch_size": 64, "max_num_tokens": 8192, "max_model_len": 32768, "tensor_parallel_size": 2},
    {"kv_cache_dtype": "fp8", "enable_block_reuse": False, "enable_chunked_prefill": True},
    {"speculative": {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3}},
    {"speculative": {"method": "eagle3", "num_speculative_tokens": 3, "model": "s3://inferry-weights/eagle3"}},
    {"speculative": {"method": "draft_model", "num_speculative_tokens": 3, "model": "/opt/draft"}},
    {"speculative": {"method": "mtp", "num_speculative_tokens": 2}},
    {"extra_options": {"cuda_graph_config": {"enable_padding": True}, "stream_interval": 4}},
]


@pytest.mark.parametrize("options", TRT_MATRIX, ids=lambda o: ",".join(o) or "defaults")
def test_trtllm_matrix_accepted_by_snapshot(options):
    spec = service_spec(trt(options))
    assert spec.command == ("trtllm-serve",) and spec.needs_auth_proxy and spec.listen_port != spec.port
    assert check_args("tensorrt-llm", spec.version, spec.args) == []
    for f in spec.files:
        assert check_yaml(spec.version, yaml.safe_load(f.content)) == []
        assert spec.args[spec.args.index("--config") + 1] == f.mount_path


def test_trtllm_yaml_refuses_unknown_keys():
    assert check_yaml("1.2.1", {"kv_cache_config": {"free_gpu_mem": 0.5}, "max_batch": 4})
    assert check_yaml("1.2.1", {"speculative_config": {"decoding_type": "Eagle3", "max_draft_len": 3}},
                      backend="tensorrt")


def test_tensorrt_backend_builds_an_engine_keyed_by_gpu_and_version():
    build = {"backend": "tensorrt", "build": {"qformat": "fp8"}}
    a = service_spec(trt(build)).build
    b = service_spec(deployment({"kind": "tensorrt-llm", **build},
                                provider={**BASE["provider"], "gpu": "A100-80GB"})).build
    assert a and b and a.cache_key != b.cache_key and a.cache_key == service_spec(trt(build)).build.cache_key
    assert "trtllm-build" in a.script and "--qformat fp8" in a.script
    assert service_spec(trt(build)).args[0] == a.output_dir
