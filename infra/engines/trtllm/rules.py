"""TensorRT-LLM's `inferry validate` rules: backend per version, option combinations, extra_options, served name."""
from __future__ import annotations

import yaml

from infra.stack.config import Deployment, TrtllmEngine
from infra.engines import options, rules
from infra.engines.trtllm import extra_options, service
from infra.engines.trtllm.option_types import type_problems
from infra.errors import Problem


def _e(d: Deployment) -> TrtllmEngine:
    assert isinstance(d.engine, TrtllmEngine)
    return d.engine


def backend_rule(version: str, backend: str) -> list[Problem]:
    """The TensorRT (engine-build) backend ships in TensorRT-LLM up to the 1.2 line, not after."""
    major, minor = (int(x) for x in version.split(".")[:2])
    if backend != "tensorrt" or (major, minor) <= (1, 2):
        return []
    return [Problem("engine.backend", f"TensorRT-LLM {version} no longer ships the TensorRT backend "
                    "(PyTorch backend only after the 1.2 line)", "'tensorrt'",
                    hint="use backend: pytorch, or pin engine.version to a 1.2.x release")]


def served_name_problems(d: Deployment) -> list[Problem]:
    """TensorRT-LLM lists a model under its folder's name (no option chooses it): say so when that is not
    model.name. Requests for model.name still work: trtllm-serve never checks the requested model
    (tensorrt_llm/serve/openai_server.py, OpenAIServer.openai_chat), and the health gate waits for the listed name."""
    served = service.service_spec(d).served_model_name
    if served == d.model.name:
        return []
    return [Problem("model.name", f"TensorRT-LLM lists this model as {served!r} in /v1/models (the name of its "
                    "folder: trtllm-serve has no option to choose it); requests for model.name are served too",
                    found=d.model.name, hint=f"to list it as {d.model.name!r}, name the weights' folder (the last "
                    "part of model.weights) after model.name", severity="warning")]


def config_rules(d: Deployment) -> list[Problem]:
    """TensorRT-LLM-only combinations: backend per version, quantization on the PyTorch backend, extra_options
    against the typed fields and the backend's YAML rules; then the name /v1/models lists."""
    e = _e(d)
    problems = backend_rule(e.version, e.backend)
    if e.backend == "pytorch" and e.quantization is not None:
        # The PyTorch backend reads the quantization from the checkpoint (ModelOpt hf_quant_config.json).
        problems.append(Problem("engine.quantization", "the PyTorch backend takes quantization from a "
                                "pre-quantized checkpoint, not from a flag", repr(e.quantization),
                                severity="warning", hint="point model.weights at a ModelOpt-quantized checkpoint"))
    problems += extra_options.conflict_problems(d)
    problems += extra_options.tensorrt_backend_problems(e, service.config_yaml(d))
    if e.kv_cache_dtype == "fp8_e5m2":
        problems.append(Problem("engine.kv_cache_dtype", "TensorRT-LLM's FP8 KV cache is E4M3 only",
                                "'fp8_e5m2'", hint="use fp8"))
    return problems + served_name_problems(d)


def option_problems(d: Deployment) -> list[Problem]:
    """Every rendered flag and --config YAML key exists in the pinned version, extra_options typed; nothing
    when the version refuses the backend itself (backend_rule says so)."""
    e = _e(d)
    if backend_rule(e.version, e.backend):
        return []
    spec = service.service_spec(d)
    problems = rules.snapshot_problems(spec)
    if problems:
        return problems
    problems = rules.argv_problems(spec, "engine")
    for f in spec.files:
        problems += [Problem("engine.extra_options", f"{spec.engine} {spec.version} --config: {msg}")
                     for msg in options.check_yaml(spec.version, yaml.safe_load(f.content), e.backend)]
    return problems + type_problems(options.snapshot(spec.engine, spec.version)["yaml"], spec.version,
                                    e.backend, e.extra_options)


def fp8_compute(e: TrtllmEngine) -> bool:
    """FP8 quantization, asked for directly or by the TensorRT engine build's qformat."""
    return e.quantization == "fp8" or (e.build is not None and e.build.qformat == "fp8")
