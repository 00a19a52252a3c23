"""The bucket dynamic provider, driven through Pulumi's own provider host against a real S3 server."""
from __future__ import annotations

import json

import pytest

from infra.storage.bucket import BucketProvider, credentials_id
from tests.support.pulumi_dynamic_host import DynamicHost, DynamicProviderError


@pytest.fixture(scope="module")
def host():
    with DynamicHost() as h:
        yield h


def _inputs(server, bucket, **kw):
    base = {"endpoint": server.endpoint, "region": server.region, "bucket": bucket, "addressing_style": "path",
            "tags": {}, "force_destroy": False, "credentials_id": credentials_id(server.access_key)}
    return {**base, **kw}


def test_create_read_diff_delete_through_the_host(host, s3_server):
    p = BucketProvider(s3_server.access_key, s3_server.secret_key)
    ins = _inputs(s3_server, "bkt-crud", tags={"team": "ml"})
    made = host.create(p, ins)
    assert made.id == "bkt-crud" and made.outs["adopted"] is False
    assert (s3_server.root / "bkt-crud").is_dir()
    text = json.dumps(made.outs)
    assert s3_server.secret_key not in text and s3_server.access_key not in text
    assert host.diff(p, made.id, made.outs, ins).changes is False  # honest: no spurious change
    moved = host.diff(p, made.id, made.outs, {**ins, "region": "eu-west-1", "force_destroy": True})
    assert moved.changes is True and moved.replaces == ["region"]
    updated = host.update(p, made.id, made.outs, {**ins, "force_destroy": True})
    assert updated.outs["force_destroy"] is True
    assert host.read(p, made.id, updated.outs).id == "bkt-crud"
    host.delete(p, made.id, updated.outs)
    assert not (s3_server.root / "bkt-crud").exists()
    assert host.read(p, made.id, updated.outs).id == ""


def test_adopts_existing_bucket_and_keeps_it(host, s3_server):
    s3_server.bucket("bkt-adopt")
    p = BucketProvider(s3_server.access_key, s3_server.secret_key)
    made = host.create(p, _inputs(s3_server, "bkt-adopt"))
    assert made.outs["adopted"] is True
    host.delete(p, made.id, made.outs)
    assert (s3_server.root / "bkt-adopt").is_dir()


def test_refuses_to_delete_non_empty_bucket_unless_force_destroy(host, s3_server):
    p = BucketProvider(s3_server.access_key, s3_server.secret_key)
    made = host.create(p, _inputs(s3_server, "bkt-full"))
    s3_server.boto3_client().put_object(Bucket="bkt-full", Key="m/x.safetensors", Body=b"w")
    with pytest.raises(DynamicProviderError, match="not empty"):
        host.delete(p, made.id, made.outs)
    assert (s3_server.root / "bkt-full" / "m" / "x.safetensors").exists()
    forced = host.update(p, made.id, made.outs, {**_inputs(s3_server, "bkt-full"), "force_destroy": True})
    host.delete(p, made.id, forced.outs)
    assert not (s3_server.root / "bkt-full").exists()


def test_wrong_keys_and_rejected_name_are_clear_errors(host, s3_server):
    bad = BucketProvider(s3_server.access_key, "wrong-secret")
    with pytest.raises(DynamicProviderError, match="rejected the credentials"):
        host.create(bad, _inputs(s3_server, "bkt-denied"))
    ok = BucketProvider(s3_server.access_key, s3_server.secret_key)
    with pytest.raises(DynamicProviderError, match="rejects bucket name"):
        host.create(ok, _inputs(s3_server, "Bad_Bucket"))


def test_key_rotation_is_an_update_not_a_replacement(host, s3_server):
    p = BucketProvider(s3_server.access_key, s3_server.secret_key)
    ins = _inputs(s3_server, "bkt-rotate")
    made = host.create(p, ins)
    d = host.diff(p, made.id, made.outs, {**ins, "credentials_id": credentials_id("another-key")})
    assert d.changes is True and d.replaces == []
    host.delete(p, made.id, made.outs)
