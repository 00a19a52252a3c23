"""`inferry migrate` planning: what differs, what is refused, what the copy will cost."""
from __future__ import annotations

import pytest

from infra.errors import InferryError
from infra.lifecycle.journal import DEFAULT_RATE, Journal, load_rate, record_rate
from infra.lifecycle.migrate import Estimate, Migration
from infra.lifecycle.stackdiff import diff, pinned_changes
from infra.stack.stackfile import load_stack
from tests.support.progharness import write_stack

SSH = {"kind": "ssh", "hosts": [{"address": "10.0.0.2"}], "private_key": {"env": "SSH_KEY"}}


def test_example_stacks_differ_only_where_a_move_should():
    d = diff(load_stack("aws-k8s").deployment, load_stack("eu-ssh").deployment)
    assert {x.section for x in d} == {"target", "storage", "provider"}
    assert pinned_changes(d) == []
    lines = [x.line() for x in d]
    assert "  provider.egress_per_gb: 0.09 -> 0.0" in lines
    assert "  target.kind: kubernetes -> ssh" in lines


def test_secret_references_are_compared_not_their_values(tmp_path):
    a = load_stack(str(write_stack(tmp_path, "a", target=SSH, storage_endpoint="http://s3.a", env_prefix="A")))
    b = load_stack(str(write_stack(tmp_path, "b", target=SSH, storage_endpoint="http://s3.b", env_prefix="B")))
    lines = [x.line() for x in diff(a.deployment, b.deployment)]
    assert "  serving.api_key: {env: A_API_KEY} -> {env: B_API_KEY}" in lines


def test_refuses_model_or_engine_changes_unless_allowed(tmp_path):
    a = load_stack(str(write_stack(tmp_path, "a", target=SSH, storage_endpoint="http://s3.a", env_prefix="A")))
    engine = dict(a.deployment.engine.model_dump(mode="json", exclude_none=True), max_model_len=8192)
    b = load_stack(str(write_stack(tmp_path, "b", target=SSH, storage_endpoint="http://s3.b", env_prefix="B",
                                   engine=engine,
                                   model={"name": "other-model", "weights": "/models/other"})))
    m = Migration(a, b, deployer=None, weights=None, root=tmp_path, say=lambda s: None)
    with pytest.raises(InferryError) as e:
        m.plan()
    text = e.value.render()
    assert "engine.max_model_len: 32768 -> 8192" in text and "model.name: llama-3.1-8b-instruct -> other-model" in text
    assert "--allow-changes" in text


def test_estimate_numbers():
    e = Estimate(nbytes=16_000_000_000, rate=200e6, rate_source="measured", egress_per_gb=0.09)
    assert e.seconds == 80 and e.egress_cost == pytest.approx(1.44)
    assert e.line() == "weights: 16.00 GB, ~80s at 200 MB/s (measured), egress ~$1.44 at $0.090/GB"


def test_rate_is_measured_once_a_copy_ran(tmp_path):
    assert load_rate(tmp_path) == (DEFAULT_RATE, "default")
    record_rate(tmp_path, 1000, 1.0)  # too small to mean anything
    assert load_rate(tmp_path)[1] == "default"
    record_rate(tmp_path, 300 << 20, 2.0)
    assert load_rate(tmp_path) == ((300 << 20) / 2.0, "measured")


def test_journal_resumes_and_forgets_other_stack_contents(tmp_path):
    a = load_stack(str(write_stack(tmp_path, "a", target=SSH, storage_endpoint="http://s3.a", env_prefix="A")))
    b = load_stack(str(write_stack(tmp_path, "b", target=SSH, storage_endpoint="http://s3.b", env_prefix="B")))
    j = Journal.open(tmp_path, a, b)
    j.mark("copy", "1 GB")
    assert Journal.open(tmp_path, a, b).done == {"copy": "1 GB"}
    b2 = load_stack(str(write_stack(tmp_path, "b", target=SSH, storage_endpoint="http://s3.c", env_prefix="B")))
    stale = Journal.open(tmp_path, a, b2)
    assert stale.stale and stale.done == {}
    j.finish()
    assert Journal.open(tmp_path, a, b).done == {}
