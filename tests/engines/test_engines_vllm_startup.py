"""vLLM 0.33 start-up rules at `inferry validate`: stacks that used to pass and that vLLM refuses after parsing
get one bullet naming the field and the fix; argv forms vLLM's FlexibleArgumentParser accepts now pass."""
from __future__ import annotations

import json

import pytest
import yaml

from infra.engines.vllm import scheduler as vllm_scheduler
from infra.engines.options import check_args, parse, snapshot
from infra.engines.vllm.startup import EXTRA, typed_fields
from infra.stack.validate import findings
from tests.conftest import ROOT
from tests.engines.test_engines import BASE, deployment


def found(engine: dict, **sections):
    # Prompt logging allowed: the start-up rules are under test here (the policy: test_engines_privacy.py).
    sections.setdefault("serving", {**BASE["serving"], "log_prompts": True})
    return findings(deployment({"kind": "vllm", **engine}, **sections))


def errors(engine: dict, **sections):
    return [p for p in found(engine, **sections) if p.severity == "error"]


REFUSED = [
    # SchedulerConfig.verify_max_model_len, chunked prefill off.
    ({"enable_chunked_prefill": False, "max_num_batched_tokens": 4096, "max_model_len": 8192},
     "engine.max_num_batched_tokens", "below max_model_len (8192) with chunked prefill off", "to 8192 or more"),
    # max_model_len unset: vLLM takes the model's own context (131072 for Llama 3.1 8B).
    ({"enable_chunked_prefill": False, "max_num_batched_tokens": 16384},
     "engine.max_num_batched_tokens", "below max_model_len (131072)", "to 131072 or more"),
    ({"max_num_batched_tokens": 64, "max_num_seqs": 128},
     "engine.max_num_batched_tokens", "(64) is below max_num_seqs (128)", "to 128 or more"),
    ({"max_num_seqs": 128, "extra_args": ["--max-num-active-seqs", "512"]},
     EXTRA, "--max-num-active-seqs (512) is above max_num_seqs (128)", "use 128 or less"),
    ({"max_model_len": 32768, "extra_args": ["--long-prefill-token-threshold", "65536"]},
     EXTRA, "above max_model_len (32768)", "use 32768 or less"),
    # validate_parsed_serve_args: dependent flags.
    ({"extra_args": ["--enable-auto-tool-choice"]}, EXTRA, "--enable-auto-tool-choice needs --tool-call-parser",
     "add --tool-call-parser NAME"),
    ({"extra_args": ["--enable-log-outputs"]}, EXTRA, "--enable-log-outputs needs --enable-log-requests",
     "add --enable-log-requests"),
    ({"extra_args": ["--enable-per-request-metrics", "--disable-log-stats"]}, EXTRA,
     "--enable-per-request-metrics needs engine statistics", "drop one"),
    ({"extra_args": ["--grpc-port", "50051"]}, EXTRA, "needs VLLM_USE_RUST_FRONTEND=1", "remove --grpc-port"),
    # create_engine_config: an option and the same key of its config group.
    ({"extra_args": ["--attention-backend", "FLASH_ATTN", "--attention-config.backend", "TRITON_ATTN"]}, EXTRA,
     "--attention-backend and --attention-config.backend are mutually exclusive", "keep only one"),
    ({"extra_args": ["--max-cudagraph-capture-size", "64", "-cc", '{"max_cudagraph_capture_size": 32}']}, EXTRA,
     "mutually exclusive", "keep only one"),
    # validate_api_server_args: names in the parser registries.
    ({"extra_args": ["--enable-auto-tool-choice", "--tool-call-parser", "llama3-json"]}, EXTRA,
     "'llama3-json' is not registered in this vLLM: it refuses to start (did you mean llama3_json?)",
     "use --tool-call-parser llama3_json"),
    ({"extra_args": ["--reasoning-parser", "deepseek-r1"]}, EXTRA, "(did you mean deepseek_r1?)",
     "use --reasoning-parser deepseek_r1"),
    ({"extra_args": ["--reasoning-parser", "no-such-thinker-at-all"]}, EXTRA, "not registered", "use one of beam,"),
    # Options inferry owns.
    ({"extra_args": ["--port", "9000"]}, EXTRA, "--port is set by inferry", "set serving.port"),
    ({"extra_args": ["--host", "127.0.0.1"]}, EXTRA, "--host is set by inferry", "remove --host"),
    ({"extra_args": ["--served-model-name", "other"]}, EXTRA, "--served-model-name is set by inferry",
     "set model.name"),
    ({"extra_args": ["--api-key", "sk-123"]}, EXTRA, "visible to every process", "set serving.api_key"),
    ({"extra_args": ["-tp", "2"]}, EXTRA, "--tensor-parallel-size is set by inferry",
     "set engine.tensor_parallel_size"),
    ({"extra_args": ["--data-parallel-size", "2"]}, EXTRA, "one engine per replica", "run more replicas"),
    ({"extra_args": ["--uds", "/tmp/v.sock"]}, EXTRA, "leaves serving.port unanswered", "set serving.port"),
    ({"max_model_len": 8192, "extra_args": ["--max_model_len", "4096"]}, EXTRA, "engine.max_model_len is the stack's",
     "set engine.max_model_len"),
]


@pytest.mark.parametrize("engine,path,message,hint", REFUSED, ids=lambda v: str(v)[:40] if isinstance(v, dict) else None)
def test_refused_at_start_is_one_bullet_naming_field_and_fix(engine, path, message, hint):
    (p,) = errors(engine)
    assert p.path == path and message in p.message and hint in p.hint, p.render()
    # It used to pass: the command line parses.
    assert check_args("vllm", "0.33.0", ["m", *engine.get("extra_args", [])]) == []


def test_unset_batch_limits_take_vllm_defaults_for_the_gpu():
    # get_batch_defaults: 2048 tokens below 70 GiB (L40S); 8192 on an H100 (80 GB, not an A100).
    small = errors({"max_num_seqs": 4096}, provider={**BASE["provider"], "gpu": "L40S"})
    (p,) = [p for p in small if p.path == "engine.max_num_seqs"]
    assert "default max_num_batched_tokens here is 2048" in p.message and "max_num_seqs to 2048 or less" in p.hint
    assert not [p for p in errors({"max_num_seqs": 4096}) if "max_num_seqs" in p.message]
    doubled = errors({"max_num_seqs": 4096, "extra_args": ["--performance-mode", "throughput"]},
                     provider={**BASE["provider"], "gpu": "L40S"})
    assert not [p for p in doubled if "max_num_seqs" in p.message]  # throughput mode: 4096 tokens


@pytest.mark.parametrize("key,memory_mib,name,cc,expected", [
    ("B200", 183359, "NVIDIA B200", "10.0", (16384, 1024)), ("H100", 81559, "NVIDIA H100 80GB HBM3", "9.0", (8192, 1024)),
    ("A100", 81920, "NVIDIA A100-SXM4-80GB", "8.0", (2048, 256)), ("GB10", 122000, "NVIDIA GB10", "12.1", (2048, 256)),
    ("L40S", 46068, "NVIDIA L40S", "8.9", (2048, 256)),
])
def test_batch_defaults_tiers(key, memory_mib, name, cc, expected):
    assert vllm_scheduler.batch_defaults(memory_mib * 2**20, name, cc) == expected


def test_chunked_prefill_on_by_default_so_small_batches_pass():
    assert errors({"max_num_batched_tokens": 4096, "max_model_len": 8192}) == []


ACCEPTED = [
    (["--max_log_len", "100"], "max_log_len", 100),
    (["--compilation-config.cudagraph_mode", "FULL_AND_PIECEWISE"], "compilation_config",
     {"cudagraph_mode": "FULL_AND_PIECEWISE"}),
    (["--compilation_config.pass_config.fuse_norm_quant=true", "--compilation-config.mode", "3"],
     "compilation_config", {"pass_config": {"fuse_norm_quant": True}, "mode": 3}),
    # Dot keys merge per option string as written: -cc's JSON comes last and wins, as in vLLM.
    (["--compilation-config.mode", "3", "-cc.max_cudagraph_capture_size", "64"], "compilation_config",
     {"max_cudagraph_capture_size": 64}),
    (["--limit-mm-per-prompt.image=0", "--limit-mm-per-prompt.video", "1"], "limit_mm_per_prompt",
     {"image": 0, "video": 1}),
    (["--compilation-config.custom_ops+", "none,+rms_norm", "--compilation-config.custom_ops+", "-silu"],
     "compilation_config", {"custom_ops": ["none", "+rms_norm", "-silu"]}),
    (["--aux-output-config", '{"max_bytes": 1G}'], "aux_output_config", {"max_bytes": 2**30}),
    (["-O3"], "optimization_level", "3"),
    (["-O", "2"], "optimization_level", "2"),
    (["-O=1"], "optimization_level", "1"),
    (["--enable-auto-tool-choice", "--tool-call-parser", "hermes"], "tool_call_parser", "hermes"),
    (["--enable-auto-tool-choice", "--tool-call-parser", "mine", "--tool-parser-plugin", "/opt/p.py"],
     "tool_call_parser", "mine"),
    (["--reasoning-parser", "deepseek_r1"], "reasoning_parser", "deepseek_r1"),
    (["--reasoning-parser", "None"], "reasoning_parser", "None"),  # parse_reasoning_parser: none = unset
    (["--enable-log-requests", "--enable-log-outputs"], "enable_log_outputs", True),
]


@pytest.mark.parametrize("extra,dest,value", ACCEPTED, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_forms_vllm_accepts_pass_validate(extra, dest, value):
    assert errors({"extra_args": extra}) == []
    got = getattr(parse("vllm", "0.33.0", ["m", *extra]), dest)
    if dest == "aux_output_config":  # vLLM expands 1G inside the JSON before validating it
        assert json.loads(got.replace("1G", str(2**30))) == value
        return
    assert (json.loads(got) if isinstance(got, str) and isinstance(value, dict) else got) == value


@pytest.mark.parametrize("extra,needle", [
    (["--compilation-config.cudagraph_mod", "FULL"], "unknown key 'cudagraph_mod' (did you mean cudagraph_mode?)"),
    (["--attention-config", '{"backnd": "FLASH_ATTN"}'], "unknown key 'backnd' (did you mean backend?)"),
    (["-cc", "3"], "expected a JSON object"),
])
def test_config_group_keys_are_the_config_class_fields(extra, needle):
    # parse_dataclass: the pydantic config classes forbid unknown keys, so the parser itself refuses them.
    (p,) = errors({"extra_args": extra})
    assert p.path == EXTRA and needle in p.message


def test_abbreviation_passes_with_a_warning_and_an_ambiguous_one_is_refused():
    (w,) = [p for p in found({"extra_args": ["--max-log-le", "100"]}) if p.path == EXTRA]
    assert w.severity == "warning" and "abbreviation of --max-log-len" in w.message and "write --max-log-len" in w.hint
    (p,) = errors({"extra_args": ["--max-log", "100"]})
    assert "ambiguous option --max-log" in p.message


def test_typed_fields_name_real_engine_fields():
    from infra.stack.config_engines import VllmEngine

    fields = typed_fields("0.33.0")
    assert fields["max_num_batched_tokens"] == "engine.max_num_batched_tokens" and fields["port"] == "serving.port"
    assert {f.split(".", 1)[1] for f in fields.values() if f.startswith("engine.")} <= set(VllmEngine.model_fields)


def test_snapshot_carries_the_registries_and_where_they_came_from():
    values = snapshot("vllm", "0.33.0")["values"]
    assert {"hermes", "llama3_json", "qwen3_coder"} <= set(values["tool_call_parser"])
    assert {"deepseek_r1", "qwen3", "openai_gptoss"} <= set(values["reasoning_parser"])
    sources = snapshot("vllm", "0.33.0")["values_sources"]
    assert "_TOOL_PARSERS_TO_REGISTER" in sources["tool_call_parser"]
    assert {"mode", "cudagraph_mode", "pass_config", "custom_ops"} <= set(values["compilation_config.keys"])
    assert "EngineArgs.compilation_config" in sources["compilation_config.keys"]


def test_inferry_validate_prints_the_bullet(cli, tmp_path):
    stack = yaml.safe_load((ROOT / "stacks" / "Pulumi.eu-ssh.yaml").read_text())
    engine = stack["config"]["inferry:deployment"]["engine"]
    engine["extra_args"] = ["--enable-auto-tool-choice", "--tool-call-parser", "llama3-json"]
    path = tmp_path / "Pulumi.tools.yaml"
    path.write_text(yaml.safe_dump(stack))
    r = cli("validate", str(path))
    assert r.exit_code == 1 and r.output.count("•") == 1 and "engine.extra_args: --tool-call-parser" in r.output
    assert "did you mean llama3_json?" in r.output
    assert "Traceback" not in r.output
    engine["extra_args"][2] = "llama3_json"
    path.write_text(yaml.safe_dump(stack))
    assert cli("validate", str(path)).exit_code == 0
