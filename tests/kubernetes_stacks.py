"""Variants of the bundled Kubernetes stack for the option matrix, and the engine spec each one serves."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from infra.config import Deployment
from infra.engines.spec import ServiceSpec
from infra.stackfile import parse_deployment

ROOT = Path(__file__).resolve().parent.parent
K8S_STACK = ROOT / "stacks" / "Pulumi.aws-k8s.yaml"
SSH_TWIN = ROOT / "stacks" / "Pulumi.eu-ssh.yaml"

TRTLLM = {"kind": "tensorrt-llm", "backend": "tensorrt", "max_model_len": 32768, "tensor_parallel_size": 2,
          "quantization": "fp8", "build": {"qformat": "fp8"}}
CASES: dict[str, dict[str, Any]] = {
    "bundled": {},
    "pvc-hpa-pdb-monitor": {"target": {"weights_delivery": "pvc", "storage_class": "fast-rwx",
                                       "autoscaling": {"engine": "hpa", "min_replicas": 1, "max_replicas": 3},
                                       "pdb_min_available": 1, "service_monitor": True}},
    "stream-fixed-replicas": {"engine": {"load_format": "runai_streamer"},
                              "target": {"weights_delivery": "stream", "autoscaling": None, "replicas": 3}},
    "scale-to-zero-ingress": {"target": {"autoscaling": {"engine": "keda", "min_replicas": 0, "max_replicas": 4,
                                                         "scale_to_zero": True},
                                         "ingress": {"host": "llm.example.eu", "tls_secret": "llm-tls",
                                                     "class_name": "nginx"}}},
    "trtllm-build-tp2": {"engine": TRTLLM, "provider": {"gpu_count": 2},
                         "target": {"autoscaling": {"engine": "keda", "min_replicas": 1, "max_replicas": 2,
                                                    "metric": "trtllm_num_requests_waiting"},
                                    "pdb_min_available": 1}},
    "existing-namespace-no-ingress-tls": {"target": {"create_namespace": False, "namespace": "ml-serving",
                                                     "node_selector": {"pool": "h100"},
                                                     "labels": {"team": "ml-platform"},
                                                     "ingress": {"host": "llm.internal"}}},
}


def raw_deployment(path: Path = K8S_STACK) -> dict[str, Any]:
    """The deployment object of a bundled stack file, as plain data."""
    return yaml.safe_load(path.read_text())["config"]["inferry:deployment"]


def _merge(base: dict, change: dict, top: bool = True) -> dict:
    out = copy.deepcopy(base)
    for key, value in change.items():
        if top and key == "engine" and value.get("kind", base["engine"]["kind"]) != base["engine"]["kind"]:
            out[key] = copy.deepcopy(value)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value, top=False)
        elif value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def deployment(case: str) -> Deployment:
    """The bundled Kubernetes deployment with one case's changes, validated like any stack file."""
    return parse_deployment(_merge(raw_deployment(), CASES[case]), f"case {case}")


def spec_of(d: Deployment) -> ServiceSpec:
    """A ServiceSpec shaped like the engines' for d (hand-built until infra.engines.service_spec lands)."""
    from infra.engines.spec import BuildStep, EnvVar, SpecFile

    api = EnvVar("VLLM_API_KEY", secret=d.serving.api_key, secret_field="serving.api_key")
    if d.engine.kind == "vllm":
        streams = d.engine.load_format == "runai_streamer"
        model = d.model.weights if streams else "/models"
        env = (api,) + ((EnvVar("AWS_ENDPOINT_URL", value=d.storage.endpoint),
                         EnvVar("AWS_ACCESS_KEY_ID", secret=d.storage.access_key_id,
                                secret_field="storage.access_key_id"),
                         EnvVar("AWS_SECRET_ACCESS_KEY", secret=d.storage.secret_access_key,
                                secret_field="storage.secret_access_key")) if streams else ())
        return ServiceSpec(engine="vllm", version="0.33.0", image="vllm/vllm-openai:v0.33.0",
                           command=("vllm", "serve"), args=(model, "--served-model-name", d.model.name,
                                                           "--port", "8000", "--tensor-parallel-size",
                                                           str(d.engine.tensor_parallel_size)),
                           env=env, gpus=d.engine.gpus, served_model_name=d.model.name, model_dir=model,
                           streams_weights=streams)
    build = BuildStep(image="nvcr.io/nvidia/tensorrt-llm/release:1.2.1", script="trtllm-build --output_dir /engine",
                      cache_key="builds/llama-3.1-8b-instruct/h100-trtllm-1.2.1-abc123", output_dir="/engine")
    return ServiceSpec(engine="tensorrt-llm", version="1.2.1", image="nvcr.io/nvidia/tensorrt-llm/release:1.2.1",
                       command=("trtllm-serve",), args=("/engine", "--backend", "tensorrt", "--config",
                                                        "/etc/inferry/extra-llm-api.yaml"),
                       files=(SpecFile("extra-llm-api.yaml", "kv_cache_config:\n  free_gpu_memory_fraction: 0.9\n",
                                       "/etc/inferry/extra-llm-api.yaml"),),
                       env=(api,), gpus=d.engine.gpus, served_model_name=d.model.name, build=build)
