"""The whole program under the harness: the weight store's bucket is really created, kept, updated, deleted.

The harness (tests/support/progharness.py), because the Kubernetes stacks' bucket is the point here and the
cluster tier needs its own tools; and the CLI's lifecycle commands are driven in-process with it."""
from __future__ import annotations

import json

import pytest
import yaml

from infra.stack.stackfile import load_stack
from infra.storage.settings import StoreSettings
from tests.support.progharness import ProgramHarness, write_stack

# Kubernetes objects are plain resources under mocks: the bucket is the one dynamic resource here.
K8S = {"kind": "kubernetes", "context": "test", "namespace": "inferry", "replicas": 1}


@pytest.fixture
def store(s3_server, monkeypatch):
    for var, value in (("P_S3_ACCESS", s3_server.access_key), ("P_S3_SECRET", s3_server.secret_key),
                       ("P_API_KEY", "k")):
        monkeypatch.setenv(var, value)
    return s3_server


def buckets(server) -> set[str]:
    s = StoreSettings(server.endpoint, "us-east-1", "x", server.access_key, server.secret_key)
    return {b["Name"] for b in s.client().list_buckets()["Buckets"]}


def with_tags(stack, tags):
    doc = yaml.safe_load(stack.path.read_text())
    doc["config"]["inferry:deployment"]["storage"]["tags"] = tags
    stack.path.write_text(yaml.safe_dump(doc))
    return load_stack(str(stack.path))


def test_bucket_created_then_unchanged_then_updated_then_destroyed(tmp_path, store):
    stack = load_stack(str(write_stack(tmp_path, "prog", target=K8S, storage_endpoint=store.endpoint,
                                       env_prefix="P")))
    h = ProgramHarness(tmp_path / "state")
    out = h.up(stack, print)
    assert "inferry-weights" in buckets(store) and out["weights_bucket"].value == "inferry-weights"
    assert h.last.ops == {"create": 1}
    h.up(stack, print)
    assert h.last.ops == {"same": 1}  # the second run changes nothing
    stack = with_tags(stack, {"team": "ml"})
    assert h.preview(stack, print).counts == {"update": 1}
    h.up(stack, print)
    assert h.last.ops == {"update": 1}
    assert h.outputs(stack)["model"].value == "llama-3.1-8b-instruct"
    h.destroy(stack, print)
    assert "inferry-weights" not in buckets(store) and h.outputs(stack) == {}


def test_recorded_inputs_and_outputs_hold_no_key(tmp_path, store):
    stack = load_stack(str(write_stack(tmp_path, "prog2", target=K8S, storage_endpoint=store.endpoint,
                                       env_prefix="P")))
    h = ProgramHarness(tmp_path / "state")
    h.up(stack, print)
    # __provider is the pickled provider, which Pulumi itself stores encrypted; everything else is plain state.
    recorded = [{k: v for k, v in r[part].items() if k != "__provider"}
                for r in h.state(stack)["resources"].values() for part in ("inputs", "outputs")]
    text = json.dumps([recorded, h.state(stack)["outputs"]])
    assert "credentials_id" in text and store.secret_key not in text and store.access_key not in text
    h.destroy(stack, print)


def test_cli_lifecycle_commands_over_the_harness(cli, tmp_path, store, monkeypatch):
    path = write_stack(tmp_path, "cli", target=K8S, storage_endpoint=store.endpoint, env_prefix="P")
    h = ProgramHarness(tmp_path / "state")
    monkeypatch.setattr("cli.lifecycle.make_deployer", lambda: h)
    r = cli("up", str(path))
    assert r.exit_code == 0, r.output
    assert "updating cli" in r.output and "  create inferry:Bucket weights-bucket" in r.output
    assert "  weights_bucket: inferry-weights" in r.output
    r = cli("preview", str(path))
    assert r.exit_code == 0 and "cli would change: 1 unchanged" in r.output
    r = cli("outputs", str(path), "--json")
    assert json.loads(r.output)["model"] == "llama-3.1-8b-instruct"
    r = cli("destroy", str(path), input="n\n")
    assert r.exit_code == 1 and "inferry-weights" in buckets(store)  # refused at the prompt
    r = cli("destroy", str(path), "--yes")
    assert r.exit_code == 0 and "cli destroyed: 1 delete" in r.output and "inferry-weights" not in buckets(store)
    r = cli("migrate", "--from", str(path), "--to", str(path), "--yes")
    assert r.exit_code == 1 and "the same stack" in r.output
