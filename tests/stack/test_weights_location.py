"""model.weights is a key prefix inside each stack's own bucket: every target and command resolves it there."""
from __future__ import annotations

import copy

import pytest
import yaml

from infra.errors import ConfigError
from infra.stack.stackfile import parse_deployment
from infra.targets.kubernetes.context import Ctx
from infra.targets.kubernetes.weights import fetch_container
from infra.targets.ssh.plan import plan_deployment
from tests.conftest import ROOT, STACKS
from tests.support.kubernetes_stacks import spec_of

PREFIX = "llama-3.1-8b-instruct"


def raw(name: str) -> dict:
    return yaml.safe_load((ROOT / "stacks" / f"Pulumi.{name}.yaml").read_text())["config"]["inferry:deployment"]


def with_store(name: str, bucket: str, weights: str = PREFIX):
    d = copy.deepcopy(raw(name))
    d["storage"]["bucket"], d["model"]["weights"] = bucket, weights
    return parse_deployment(d, "test")


def test_bundled_stacks_name_no_bucket_in_model():
    for path in STACKS:
        model = yaml.safe_load(path.read_text())["config"]["inferry:deployment"]["model"]
        assert model["weights"] == PREFIX, path


@pytest.mark.parametrize("weights, uri", [
    (PREFIX, f"s3://eu-bucket/{PREFIX}"),
    (f"{PREFIX}/", f"s3://eu-bucket/{PREFIX}"),
    ("org/llama-3.1-8b", "s3://eu-bucket/org/llama-3.1-8b"),
    (f"s3://eu-bucket/{PREFIX}", f"s3://eu-bucket/{PREFIX}"),  # the old form, naming this stack's bucket
    ("/models/llama", "/models/llama"),
])
def test_weights_resolve_inside_the_stacks_bucket(weights, uri):
    d = with_store("eu-ssh", "eu-bucket", weights)
    assert d.weights_uri == uri


@pytest.mark.parametrize("weights", ["http://host/x", "a//b", "../x", "a/./b", "s3://eu-bucket/"])
def test_unusable_prefixes_are_refused_with_the_expected_form(weights):
    with pytest.raises(ConfigError) as e:
        with_store("eu-ssh", "eu-bucket", weights)
    [p] = e.value.problems
    assert p.path == "model.weights" and "key prefix inside storage.bucket" in p.render()


def test_old_form_naming_another_bucket_says_what_to_write():
    with pytest.raises(ConfigError) as e:
        with_store("eu-ssh", "eu-bucket", f"s3://inferry-weights/{PREFIX}")
    [p] = e.value.problems
    assert p.path == "model.weights" and "storage.bucket is 'eu-bucket'" in p.message
    assert f"write `weights: {PREFIX}`" in p.hint
    with_store("eu-ssh", "eu-bucket", p.hint.split("`")[1].split(": ", 1)[1])  # the printed fix validates


def test_ssh_hosts_fetch_from_the_stacks_own_bucket():
    (w,) = plan_deployment(with_store("eu-ssh", "eu-bucket")).hosts[0].weights
    assert (w.store.bucket, w.store.prefix, w.model_dir) == (
        "eu-bucket", PREFIX, f"/var/lib/inferry/weights/{PREFIX}")


def test_kubernetes_pods_fetch_from_the_stacks_own_bucket():
    d = with_store("aws-k8s", "aws-bucket-eu-central-1")
    env = {e["name"]: e.get("value") for e in fetch_container(Ctx(d, spec_of(d)))["env"]}
    assert (env["BUCKET"], env["PREFIX"]) == ("aws-bucket-eu-central-1", PREFIX)


def test_streaming_engine_reads_the_stacks_own_bucket():
    d = raw("aws-k8s")
    d["engine"]["load_format"] = "runai_streamer"
    d["target"]["weights_delivery"] = "stream"
    d["storage"]["bucket"] = "aws-bucket"
    assert spec_of(parse_deployment(d, "test")).args[0] == f"s3://aws-bucket/{PREFIX}"


def test_plan_from_store_reads_the_stacks_own_bucket(cli, s3_server, tmp_path, monkeypatch):
    import json

    from tests.support.storage_util import make_model
    from tests.sizing.test_sizing_modelinfo import LLAMA_CONFIG

    s3_server.bucket("plan-own-bucket")
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.staging.yaml").read_text())
    dep = doc["config"]["inferry:deployment"]
    dep["model"].update(name="not-in-catalog", weights="org/llama-8b")  # a prefix: no bucket named in model
    dep["storage"].update(endpoint=s3_server.endpoint, bucket="plan-own-bucket", access_key_id={"env": "T_AK"},
                          secret_access_key={"env": "T_SK"})
    path = tmp_path / "Pulumi.own.yaml"
    path.write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("T_AK", s3_server.access_key)
    monkeypatch.setenv("T_SK", s3_server.secret_key)
    monkeypatch.setenv("INFERRY_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    make_model(tmp_path / "m", shards=(1 << 20,))
    (tmp_path / "m" / "config.json").write_text(json.dumps(LLAMA_CONFIG))
    r = cli("weights", "push", str(tmp_path / "m"), "--stack", str(path))
    assert r.exit_code == 0, r.output
    assert (s3_server.root / "plan-own-bucket" / "org" / "llama-8b" / "config.json").is_file()
    r = cli("plan", str(path), "--from-store", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["architecture_source"].startswith("config.json")
