"""Helpers for the SSH target tests: a deployment over test hosts, its secrets, a weight store the hosts reach."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from infra.stack.config import Deployment
from infra.stack.stackfile import parse_deployment
from tests.support import ssh_direct as ssh_apply
from infra.targets.ssh.plan import TargetPlan, plan_deployment

BUCKET, PREFIX, MODEL = "inferry-weights", "llama-3.1-8b-instruct", "llama-3.1-8b-instruct"
API_KEY = "sk-test-3c8e1a6f9b2d47e0c5a8f1d3b6e9c207"  # random enough for the gateway's 128-bit check
FILES = {"config.json": b'{"architectures": ["LlamaForCausalLM"]}', "tokenizer.json": b"{}" * 4096,
         "model-00001-of-00002.safetensors": bytes(range(256)) * 8192,
         "model-00002-of-00002.safetensors": hashlib.sha256(b"x").digest() * 40000}


@dataclass(frozen=True)
class Store:
    """The weight store the hosts fetch from (an S3 server on the host network's gateway)."""

    endpoint: str
    region: str
    access_key: str
    secret_key: str


@pytest.fixture(scope="session")
def weights_store(host_network, s3_server_factory, tmp_path_factory) -> Store:
    """One S3 server the test hosts reach, holding a small model under PREFIX (pushed with its manifest)."""
    from infra.storage.settings import StoreSettings
    from infra.storage.sync import push

    server = s3_server_factory(host=host_network.gateway)
    (server.root / BUCKET).mkdir(parents=True, exist_ok=True)
    folder = tmp_path_factory.mktemp("model")
    for rel, data in FILES.items():
        (folder / rel).write_bytes(data)
    settings = StoreSettings(server.endpoint, server.region, BUCKET, server.access_key, server.secret_key)
    push(settings, Path(folder), PREFIX, show=False)
    return Store(server.endpoint, server.region, server.access_key, server.secret_key)


def deployment(hosts: list, store: Store, engine: dict | None = None, user: str = "root", **target: Any) -> Deployment:
    """A vLLM deployment on these test hosts (process runtime, host keys pinned)."""
    return parse_deployment(raw_deployment(hosts, store, engine, user, **target), "test stack")


def raw_deployment(hosts: list, store: Store, engine: dict | None = None, user: str = "root",
                   **target: Any) -> dict[str, Any]:
    """deployment()'s stack section as a stack file holds it (secrets by environment variable)."""
    return {
        "model": {"name": MODEL, "weights": f"s3://{BUCKET}/{PREFIX}"},
        "engine": {"kind": "vllm", "max_model_len": 4096, **(engine or {})},
        "target": {"kind": "ssh", "runtime": "process", "health_timeout_s": 20, "private_key": {"env": "TEST_SSH_KEY"},
                   "hosts": [{"address": h.address, "name": h.name, "host_key": h.host_key_line, "user": user}
                             for h in hosts],
                   **target},
        "storage": {"endpoint": store.endpoint, "region": store.region, "bucket": BUCKET,
                    "access_key_id": {"env": "TEST_S3_ACCESS"}, "secret_access_key": {"env": "TEST_S3_SECRET"}},
        "provider": {"name": "test-cloud", "region": "eu-test", "gpu": "H200", "price_per_gpu_hour": 3.0},
        "serving": {"port": 8000, "api_key": {"env": "TEST_API_KEY"}},
    }


def secrets(hosts: list, store: Store) -> dict[str, str]:
    """The resolved secrets by stack field."""
    return {"target.private_key": hosts[0].client_key_text, "serving.api_key": API_KEY,
            "storage.access_key_id": store.access_key, "storage.secret_access_key": store.secret_key}


def plan_for(d: Deployment) -> TargetPlan:
    """What the component and the lifecycle build from a deployment."""
    return plan_deployment(d)


def apply(d: Deployment, hosts: list, store: Store) -> ssh_apply.TargetOutcome:
    """Apply without Pulumi (the same providers)."""
    return ssh_apply.apply(plan_for(d), secrets(hosts, store))


def ops_log(host) -> list[str]:
    """The host's record of remote writes and restarts."""
    return host.exec("cat /etc/inferry/ops.log 2>/dev/null").stdout.splitlines()


@pytest.fixture(autouse=True)
def fresh_sessions():
    """Each test starts without pooled connections (hosts are new): autouse where a test module imports it."""
    from infra.targets.ssh import pool

    pool.close_all()
    yield
    pool.close_all()
