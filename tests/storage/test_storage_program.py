"""The WeightStore under Pulumi's mocks: one dynamic Bucket, inputs free of secrets; validate's storage check.

Mocks, because the inputs are read as the program built them, before any serialisation could hide a leak."""
from __future__ import annotations

import json

from infra.stack.stackfile import load_stack
from infra.storage.checks import storage_checks
from tests.conftest import STACKS
from tests.support.harness import SECRET_SIG, run_main

BUCKET_TYPE = "pulumi-python:dynamic/inferry:Bucket"


def test_program_builds_one_bucket_without_secrets_in_its_inputs():
    stack = STACKS[0]
    mocks, exports = run_main(stack)
    [bucket] = mocks.of_type(BUCKET_TYPE)
    d = load_stack(str(stack)).deployment
    assert bucket.inputs["bucket"] == d.storage.bucket and bucket.inputs["endpoint"] == d.storage.endpoint
    assert bucket.inputs["force_destroy"] is False and len(bucket.inputs["credentials_id"]) == 12
    provider = bucket.inputs["__provider"]
    assert isinstance(provider, dict) and SECRET_SIG in provider  # the provider (holding the keys) is a secret
    plain = json.dumps({k: v for k, v in bucket.inputs.items() if k != "__provider"})
    assert "test-secret-" not in plain
    assert exports["weights_bucket"] == d.storage.bucket
    assert exports["weights"] == d.weights_uri == f"s3://{d.storage.bucket}/{d.model.weights}"
    assert mocks.of_type("inferry:storage:WeightStore")


def test_plain_http_to_a_remote_store_is_a_warning():
    d = load_stack(str(STACKS[0])).deployment
    remote = d.model_copy(update={"storage": d.storage.model_copy(update={"endpoint": "http://s3.example.eu"})})
    local = d.model_copy(update={"storage": d.storage.model_copy(update={"endpoint": "http://127.0.0.1:9000"})})
    [p] = storage_checks(remote)
    assert p.path == "storage.endpoint" and p.severity == "warning"
    assert storage_checks(local) == []
