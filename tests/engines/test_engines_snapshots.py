"""The committed option snapshots: where they come from, and the TRT-LLM generator on a source tree."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from infra.stack.config_engines import TRTLLM_VERSION, VLLM_VERSION
from infra.engines.trtllm import service as trtllm
from infra.engines.vllm import service as vllm
from infra.engines.options import snapshot
from tests.conftest import ROOT


def test_snapshots_record_their_source_and_pinned_version():
    v = snapshot("vllm", VLLM_VERSION)
    assert v["version"] == VLLM_VERSION and "make_arg_parser" in v["source"]
    t = snapshot("tensorrt-llm", TRTLLM_VERSION)
    assert t["version"] == TRTLLM_VERSION and all(s["repo"] == "NVIDIA/TensorRT-LLM" for s in t["sources"])
    assert "tensorrt" in t["backends"]


def test_every_mapped_flag_exists_in_its_snapshot():
    for module, engine, version in ((vllm, "vllm", VLLM_VERSION), (trtllm, "tensorrt-llm", TRTLLM_VERSION)):
        flags = {f for o in snapshot(engine, version)["options"] for f in o["flags"]}
        assert {f.flag for f in module.FLAGS} <= flags, engine


SERVE = '''
import click
@click.command("serve")
@click.argument("model", type=str)
@click.option("--port", type=int, default=8000)
@click.option("--backend", type=ChoiceWithAlias(["pytorch", "tensorrt"], {"trt": "tensorrt"}), default="pytorch")
@click.option("--reasoning_parser", type=click.Choice(ReasoningParserFactory.parsers.keys()), default=None)
@click.option("--config", "--extra_llm_api_options", "extra_llm_api_options", type=str, default=None)
@click.option("--trust_remote_code", is_flag=True, default=False)
def serve(model, port, backend, reasoning_parser, extra_llm_api_options, trust_remote_code):
    pass
'''
LLM_ARGS = '''
class StrictBaseModel: pass
class KvCacheConfig(StrictBaseModel):
    enable_block_reuse: bool = Field(default=True)
    dtype: str = "auto"
class DecodingBaseConfig(StrictBaseModel):
    max_draft_len: Optional[int] = None
    speculative_model: Optional[str] = Field(default=None, validation_alias=AliasChoices("speculative_model", "speculative_model_dir"))
    _private: bool = PrivateAttr(True)
class NGramDecodingConfig(DecodingBaseConfig):
    decoding_type: Literal["NGram"] = "NGram"
    max_matching_ngram_size: int = 2
    def supports_backend(self, backend: str) -> bool:
        return backend == "pytorch"
class BaseLlmArgs(StrictBaseModel):
    model: str
    kv_cache_config: KvCacheConfig = Field(default_factory=KvCacheConfig)
class TrtLlmArgs(BaseLlmArgs):
    build_config: Optional[object] = None
class TorchLlmArgs(BaseLlmArgs):
    cuda_graph_config: Optional[object] = None
    kind: ClassVar[str] = "torch"
'''


def test_snapshot_trtllm_reads_a_source_checkout(tmp_path):
    src = tmp_path / "TensorRT-LLM"
    (src / "tensorrt_llm/commands").mkdir(parents=True)
    (src / "tensorrt_llm/llmapi").mkdir(parents=True)
    (src / "tensorrt_llm/commands/serve.py").write_text(textwrap.dedent(SERVE))
    (src / "tensorrt_llm/llmapi/llm_args.py").write_text(textwrap.dedent(LLM_ARGS))
    code = ("import sys, json; sys.path.insert(0, 'scripts'); import snapshot_trtllm as s; "
            f"print(json.dumps(s.from_source(__import__('pathlib').Path({str(src)!r}), '9.9.9')))")
    snap = json.loads(subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                                     check=True).stdout)
    opts = {o["dest"]: o for o in snap["options"]}
    assert opts["model"]["flags"] == [] and opts["port"]["type"] == "int"
    assert opts["backend"]["choices"] == ["pytorch", "tensorrt", "trt"] and opts["reasoning_parser"]["choices"] is None
    assert opts["extra_llm_api_options"]["flags"] == ["--config", "--extra_llm_api_options"]
    assert opts["trust_remote_code"]["action"] == "_StoreTrueAction"
    y = snap["yaml"]
    assert y["TorchLlmArgs"] == ["cuda_graph_config", "kv_cache_config", "model"]
    assert y["KvCacheConfig"] == ["dtype", "enable_block_reuse"]
    ngram = y["speculative_config"]["NGram"]
    assert ngram["backends"] == ["pytorch"]
    assert ngram["keys"] == ["decoding_type", "max_draft_len", "max_matching_ngram_size", "speculative_model",
                             "speculative_model_dir"]


def test_options_import_with_the_standard_library_only():
    # The test hosts' stand-in engine imports this module on hosts without the project's dependencies.
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from infra.engines.options import check_args; "
            "assert check_args('vllm', '0.33.0', ['m', '--max-model-len', '32k']) == []; "
            "assert not [m for m in sys.modules if m.split('.')[0] in ('pydantic', 'yaml', 'jinja2')]")
    subprocess.run([sys.executable, "-S", "-c", code, str(ROOT)], check=True)


def test_snapshot_vllm_reads_parser_registries_from_a_wheel(tmp_path):
    import zipfile

    wheel = tmp_path / "vllm-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("vllm/tool_parsers/__init__.py", "from x import y\n_TOOL_PARSERS_TO_REGISTER = {\n"
                   "    'hermes': ('hermes_tool_parser', 'Hermes2ProToolParser'),\n"
                   "    'llama3_json': ('llama_tool_parser', 'Llama3JsonToolParser'),\n}\n")
        z.writestr("vllm/reasoning/__init__.py", "_REASONING_PARSERS_TO_REGISTER = {'qwen3': ('q', 'Q')}\n"
                   "def register(): pass\n")
    code = ("import sys, json, pathlib; sys.path.insert(0, 'scripts'); import snapshot_vllm as s; "
            f"print(json.dumps(s.registries_from_wheel(pathlib.Path({str(wheel)!r}))))")
    found = json.loads(subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                                      check=True).stdout)
    assert found == {"tool_call_parser": ["hermes", "llama3_json"], "reasoning_parser": ["qwen3"]}


def test_snapshot_vllm_reads_config_group_keys_from_a_wheel(tmp_path):
    import zipfile

    wheel = tmp_path / "vllm-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("vllm/config/compilation.py", textwrap.dedent('''
            class PassBase:
                enable_x: bool = False
            @config
            class CompilationConfig(PassBase):
                KIND: ClassVar[str] = "c"
                mode: int | None = None
                cache: dict = field(default_factory=dict, init=False)
                max_model_len: InitVar[int]
            '''))
        z.writestr("vllm/engine/arg_utils.py", textwrap.dedent('''
            class EngineArgs:
                compilation_config: CompilationConfig | None = get_field(VllmConfig, "compilation_config")
            '''))
    code = ("import sys, json, pathlib; sys.path.insert(0, 'scripts'); import snapshot_vllm as s; "
            f"print(json.dumps(s.dataclass_keys_from_wheel(pathlib.Path({str(wheel)!r}), ['compilation_config'])))")
    found = json.loads(subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                                      check=True).stdout)
    assert found == {"compilation_config.keys": ["enable_x", "max_model_len", "mode"]}
