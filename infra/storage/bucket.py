"""The weight bucket as a Pulumi dynamic resource: create or adopt, tag, delete only when empty."""
from __future__ import annotations

import hashlib
from typing import Any

from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from infra.errors import StorageError, reported
from infra.storage.settings import StoreSettings, s3_errors

# Changing where the bucket is means another bucket: replace. The rest is updated in place.
REPLACE_KEYS = ("endpoint", "region", "bucket")
UPDATE_KEYS = ("addressing_style", "tags", "force_destroy", "credentials_id")
INPUT_KEYS = REPLACE_KEYS + UPDATE_KEYS


def credentials_id(access_key: str) -> str:
    """A short, non-secret fingerprint of the access key: a key rotation is a visible update, never the key."""
    return hashlib.sha256(access_key.encode()).hexdigest()[:12]


def _plain(value: Any) -> str:
    # Inside the provider host a captured Output is restored with a working .get() (pulumi Output.__setstate__).
    return value if isinstance(value, str) else value.get()


class BucketProvider(ResourceProvider):
    """CRUD of one S3-compatible bucket. The keys are captured here, in the provider, which Pulumi always
    stores as a secret; they are neither inputs nor outputs, so they never show in state or diffs."""

    def __init__(self, access_key: Any, secret_key: Any):
        super().__init__()
        self.access_key = access_key
        self.secret_key = secret_key

    def _settings(self, props: dict[str, Any]) -> StoreSettings:
        return StoreSettings(str(props["endpoint"]), str(props["region"]), str(props["bucket"]),
                             _plain(self.access_key), _plain(self.secret_key),
                             str(props.get("addressing_style") or "path"), retries=2)

    @reported
    def create(self, props: dict[str, Any]) -> CreateResult:
        """Create the bucket, or adopt it when it already exists; then tag it."""
        s = self._settings(props)
        adopted = not ensure_bucket(s)
        return CreateResult(s.bucket, _outs(props, adopted, _tag(s, s.client(), props.get("tags") or {})))

    @reported
    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Refresh: the bucket's existence and tags as the store reports them."""
        s = self._settings(props)
        s3 = s.client()
        if not _exists(s, s3):
            return ReadResult(None, {})
        tags = _read_tags(s, s3)
        outs = dict(_outs(props, bool(props.get("adopted")), tags is not None))
        if tags is not None:
            outs["tags"] = tags
        return ReadResult(id_, outs)

    @reported
    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """Only real differences of our inputs; the serialized provider (__provider) is ignored."""
        changed = [k for k in INPUT_KEYS if _norm(olds.get(k)) != _norm(news.get(k))]
        replaces = [k for k in changed if k in REPLACE_KEYS]
        return DiffResult(changes=bool(changed), replaces=replaces, stables=[], delete_before_replace=False)

    @reported
    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        """Re-apply tags and settings that can change in place."""
        s = self._settings(news)
        s3 = s.client()
        if not _exists(s, s3):
            raise StorageError(f"bucket {s.bucket} no longer exists", "run `pulumi refresh`, then `pulumi up`",
                               where=s.endpoint)
        return UpdateResult(_outs(news, bool(olds.get("adopted")), _tag(s, s3, news.get("tags") or {})))

    @reported
    def delete(self, id_: str, props: dict[str, Any]) -> None:
        """Delete the bucket if inferry created it: only when empty unless force_destroy empties it first."""
        s = self._settings(props)
        s3 = s.client()
        if props.get("adopted") or not _exists(s, s3):
            return  # a bucket that existed before inferry stays where it was
        if props.get("force_destroy"):
            _empty(s, s3)
        with s3_errors(s, action="delete bucket"):
            listed = s3.list_objects_v2(Bucket=s.bucket, MaxKeys=1)
        if listed.get("KeyCount", 0):
            raise StorageError(f"bucket {s.bucket} is not empty; refusing to delete it",
                               "set storage.force_destroy: true to delete it with its objects, or empty it first",
                               where=s.endpoint)
        with s3_errors(s, action="delete bucket"):
            s3.delete_bucket(Bucket=s.bucket)


def _norm(value: Any) -> Any:
    return value if value not in (None, {}, "") else None


def _outs(props: dict[str, Any], adopted: bool, tags_applied: bool) -> dict[str, Any]:
    out = {k: props.get(k) for k in INPUT_KEYS}
    out.update(adopted=adopted, tags_applied=tags_applied)
    return out


def ensure_bucket(s: StoreSettings) -> bool:
    """Create the bucket unless it exists; True when this call created it (`inferry up` adopts it later)."""
    s3 = s.client()
    if _exists(s, s3):
        return False
    args: dict[str, Any] = {"Bucket": s.bucket}
    if s.region != "us-east-1":  # AWS rejects an explicit us-east-1 constraint and needs any other
        args["CreateBucketConfiguration"] = {"LocationConstraint": s.region}
    with s3_errors(s, action="create bucket"):
        s3.create_bucket(**args)
    return True


def _exists(s: StoreSettings, s3: Any) -> bool:
    from botocore.exceptions import ClientError

    with s3_errors(s, action="check bucket"):
        try:
            s3.head_bucket(Bucket=s.bucket)
            return True
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("404", "NoSuchBucket", "NotFound"):
                return False
            raise


def _tag(s: StoreSettings, s3: Any, tags: dict[str, str]) -> bool:
    """Apply tags; False when the endpoint does not support bucket tagging (many S3-compatibles)."""
    from botocore.exceptions import ClientError

    if not tags:
        return True
    try:
        s3.put_bucket_tagging(Bucket=s.bucket, Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in sorted(tags.items())]})
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
            with s3_errors(s, action="tag bucket"):
                raise
        return False
    return True


def _read_tags(s: StoreSettings, s3: Any) -> dict[str, str] | None:
    from botocore.exceptions import ClientError

    try:
        got = s3.get_bucket_tagging(Bucket=s.bucket)
    except ClientError:
        return None
    return {t["Key"]: t["Value"] for t in got.get("TagSet", [])}


def _empty(s: StoreSettings, s3: Any) -> None:
    with s3_errors(s, action="empty bucket"):
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=s.bucket):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            for key in keys:  # one by one: some S3-compatibles lack DeleteObjects (it needs Content-MD5)
                s3.delete_object(Bucket=s.bucket, **key)
