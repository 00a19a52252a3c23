"""Variants of the bundled Kubernetes stack for the option matrix, and the engine spec each one serves."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from infra.stack.config import Deployment
from infra.engines.spec import ServiceSpec
from infra.stack.stackfile import parse_deployment

ROOT = Path(__file__).resolve().parents[2]
K8S_STACK = ROOT / "stacks" / "Pulumi.aws-k8s.yaml"
SSH_TWIN = ROOT / "stacks" / "Pulumi.eu-ssh.yaml"

TRTLLM = {"kind": "tensorrt-llm", "backend": "tensorrt", "max_model_len": 32768, "tensor_parallel_size": 2,
          "quantization": "fp8", "build": {"qformat": "fp8"}, "enable_block_reuse": True,
          "max_batch_size": 64}
DRAFT = {"method": "draft_model", "model": "s3://inferry-weights/llama-3.2-1b-instruct", "num_speculative_tokens": 4}
# The bundled stack has the gateway; the cases with "gateway": None keep the paths without it (the engine checks
# the key, or the auth proxy does) covered.
CASES: dict[str, dict[str, Any]] = {
    "bundled": {},
    "pvc-hpa-pdb-monitor": {"engine": {"speculative": DRAFT},
                            "target": {"weights_delivery": "pvc", "storage_class": "fast-rwx",
                                       "autoscaling": {"engine": "hpa", "min_replicas": 1, "max_replicas": 3},
                                       "pdb_min_available": 1, "service_monitor": True}},
    "stream-fixed-replicas": {"engine": {"load_format": "runai_streamer"},
                              "target": {"weights_delivery": "stream", "autoscaling": None, "replicas": 3,
                                         "service_monitor": False, "gateway": None}},
    "scale-to-zero-ingress": {"target": {"autoscaling": {"engine": "keda", "min_replicas": 0, "max_replicas": 4,
                                                         "scale_to_zero": True},
                                         "service_monitor": False, "gateway": {"hold_s": 300},
                                         "ingress": {"host": "llm.example.eu", "tls_secret": "llm-tls",
                                                     "class_name": "nginx"}}},
    "trtllm-build-tp2": {"engine": TRTLLM, "provider": {"gpu_count": 2},
                         "target": {"autoscaling": {"engine": "keda", "min_replicas": 1, "max_replicas": 2,
                                                    "metric": "trtllm_num_requests_waiting"},
                                    "pdb_min_available": 1, "gateway": None}},
    "trtllm-gateway": {"engine": {"kind": "tensorrt-llm", "max_model_len": 32768},
                       "target": {"gateway": {"replicas": 2}, "autoscaling": None, "service_monitor": False}},
    "node-cache-draft": {"engine": {"speculative": DRAFT},
                         "target": {"weights_delivery": "node-cache", "cache_size": "500Gi",
                                    "node_selector": {"pool": "h100"}}},
    "existing-namespace-no-ingress-tls": {"target": {"create_namespace": False, "namespace": "ml-serving",
                                                     "node_selector": {"pool": "h100"},
                                                     "labels": {"team": "ml-platform"},
                                                     "ingress": {"host": "llm.internal"}, "gateway": None}},
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


def deployment(case: str, more: dict[str, Any] | None = None) -> Deployment:
    """The bundled Kubernetes deployment with one case's changes (and more), validated like any stack file."""
    return parse_deployment(_merge(_merge(raw_deployment(), CASES[case]), more or {}), f"case {case}")


def spec_of(d: Deployment) -> ServiceSpec:
    """The engine's real ServiceSpec for d, as the program builds it."""
    from infra.targets.kubernetes.deploy import spec_for

    return spec_for(d)
