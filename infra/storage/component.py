"""`WeightStore`: the stack's weight bucket as a ComponentResource over the dynamic Bucket resource."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi import dynamic

from infra.stack.secretfix import SecretField
from infra.stack import secrets
from infra.stack.config import Deployment
from infra.stack.late import Fill, unchanged
from infra.storage.bucket import BucketProvider, credentials_id


class Bucket(dynamic.Resource, module="inferry", name="Bucket"):
    """One S3-compatible bucket (see BucketProvider)."""

    bucket: pulumi.Output[str]
    adopted: pulumi.Output[bool]
    tags_applied: pulumi.Output[bool]

    def __init__(self, name: str, props: dict[str, Any], access_key: Any, secret_key: Any,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__(BucketProvider(access_key, secret_key), name,
                         {**props, "adopted": None, "tags_applied": None}, opts)


class WeightStore(pulumi.ComponentResource):
    """The bucket that holds the stack's weights; outputs bucket, endpoint and the model's s3:// URI."""

    def __init__(self, name: str, d: Deployment, opts: pulumi.ResourceOptions | None = None,
                 keys: Mapping[str, Any] | None = None, fill: Fill = unchanged):
        """keys: the S3 keys by field path (secret Outputs; default: read from the stack's references);
        fill: puts in the values that were unknown when d was checked (a bucket that is an Output)."""
        super().__init__("inferry:storage:WeightStore", name, None, opts)
        s = d.storage
        keys = keys or {f: secrets.output(ref, f) for f, ref in
                        ((SecretField.S3_ACCESS, s.access_key_id), (SecretField.S3_SECRET, s.secret_access_key))}
        ak, sk = pulumi.Output.from_input(keys[SecretField.S3_ACCESS]), keys[SecretField.S3_SECRET]
        props = fill({"endpoint": s.endpoint, "region": s.region, "bucket": s.bucket,
                      "addressing_style": s.addressing_style, "tags": dict(s.tags), "force_destroy": s.force_destroy,
                      "credentials_id": pulumi.Output.unsecret(ak.apply(credentials_id))})
        self.resource = Bucket(f"{name}-bucket", props, ak, sk, pulumi.ResourceOptions(parent=self))
        self.bucket = self.resource.bucket
        late = fill({"endpoint": s.endpoint, "weights": d.weights_uri})
        self.endpoint, self.weights = late["endpoint"], late["weights"]
        self.register_outputs({"bucket": self.bucket, "endpoint": self.endpoint, "weights": self.weights})


def build_storage(d: Deployment, name: str = "weights", opts: pulumi.ResourceOptions | None = None,
                  keys: Mapping[str, Any] | None = None, fill: Fill = unchanged) -> dict[str, Any]:
    """Create the WeightStore (see WeightStore for the arguments); returns its exports."""
    store = WeightStore(name, d, opts, keys, fill)
    return {"weights_bucket": store.bucket, "weights_endpoint": store.endpoint, "weights": store.weights}
