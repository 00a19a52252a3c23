"""Serving gets read-only store keys where the stack names them (storage.read_access_key_id/..._secret_...): the
pods' Secret, the fetch init containers and a streaming engine hold the read pair; only the build Job's upload,
which pushes the engine it built, gets the keys that write."""
from __future__ import annotations

import secrets

import pulumi
import pytest

from infra.errors import ConfigError
from infra.targets.contract import TargetArgs
from infra.targets.kubernetes.component import KubernetesTarget
from infra.targets.kubernetes.manifests import objects
from tests.support.harness import run
from tests.support.kubernetes_stacks import deployment, spec_of

READ = {"storage": {"read_access_key_id": {"env": "R_ACCESS"}, "read_secret_access_key": {"env": "R_SECRET"}}}
READ_FIELDS = {"storage.read_access_key_id", "storage.read_secret_access_key"}
WRITE_FIELDS = {"storage.access_key_id", "storage.secret_access_key"}


def secret_keys_of(case: str) -> set[str]:
    """The keys of the Secret the pods read, as the component makes it (under Pulumi's mocks)."""
    d = deployment(case, READ)
    values = {p: pulumi.Output.secret(f"v-{secrets.token_hex(32)}") for p in d.secret_refs()}  # keys the gateway takes
    mocks, _ = run(lambda: KubernetesTarget("kubernetes", TargetArgs(d, spec_of(d), values)), {}, [])
    (secret,) = [s for s in mocks.of_type("kubernetes:core/v1:Secret") if s.name.endswith("-secrets")]
    return set(secret.inputs["stringData"]["value"])


def key_refs(container: dict) -> set[str]:
    """The Secret keys a container's AWS_* variables reference."""
    return {e["valueFrom"]["secretKeyRef"]["key"] for e in container.get("env", [])
            if e["name"].startswith("AWS_") and "valueFrom" in e}


def pod_templates(manifests: list[dict]) -> list[dict]:
    return [m["spec"]["template"]["spec"] for m in manifests
            if m["kind"] in ("Deployment", "Job") and not m["metadata"]["name"].endswith("-gateway")]


def test_fetching_pods_hold_only_the_read_pair():
    d = deployment("bundled", READ)
    (pod,) = pod_templates(objects(d, spec_of(d), "test"))
    assert [key_refs(c) for c in pod["initContainers"] if c["name"].startswith("fetch")] == [READ_FIELDS]
    assert secret_keys_of("bundled") == READ_FIELDS  # the client key is the gateway's alone


def test_the_build_jobs_upload_alone_gets_the_keys_that_push():
    d = deployment("trtllm-build-tp2", READ)
    job, serving = sorted(pod_templates(objects(d, spec_of(d), "test")), key=lambda p: "restartPolicy" not in p)
    assert key_refs(job["containers"][0]) == WRITE_FIELDS  # upload-engine
    assert all(key_refs(c) <= READ_FIELDS for c in job["initContainers"] + serving.get("initContainers", []))
    assert secret_keys_of("trtllm-build-tp2") >= READ_FIELDS | WRITE_FIELDS


def test_a_streaming_engine_reads_with_the_read_pair():
    d = deployment("stream-fixed-replicas", READ)
    (pod,) = pod_templates(objects(d, spec_of(d), "test"))
    assert key_refs(pod["containers"][0]) == READ_FIELDS
    assert not secret_keys_of("stream-fixed-replicas") & WRITE_FIELDS


def test_without_a_read_pair_the_stack_keys_serve_as_before_and_half_a_pair_is_refused():
    d = deployment("bundled")
    (pod,) = pod_templates(objects(d, spec_of(d), "test"))
    assert [key_refs(c) for c in pod["initContainers"] if c["name"].startswith("fetch")] == [WRITE_FIELDS]
    with pytest.raises(ConfigError) as e:
        deployment("bundled", {"storage": {"read_access_key_id": {"env": "R_ACCESS"}}})
    assert e.value.paths == ["storage"] and "read_secret_access_key" in e.value.render()
