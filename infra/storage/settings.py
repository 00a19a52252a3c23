"""How to reach a weight store: endpoint, bucket, keys (never printed) and transfer tuning."""
from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from infra.stack.secretfix import SecretField
from infra.errors import StorageError

if TYPE_CHECKING:
    from infra.stack.config import StorageConfig
    from infra.stack.secrets import Resolve
    from infra.stack.stackfile import Stack

MiB = 1 << 20
# S3 allows at most 10,000 parts per upload and parts of at least 5 MiB (except the last).
MAX_PARTS = 10_000
ENV_ACCESS, ENV_SECRET = "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"


@dataclass(frozen=True)
class Origin:
    """What named a store, for the fixes in its errors: a stack's storage fields, or options and env variables."""

    endpoint: str = "storage.endpoint"
    keys: str = "storage.access_key_id / storage.secret_access_key"
    missing_bucket: str = "create it (`inferry up` creates the stack's bucket) or fix storage.bucket"

    @classmethod
    def options(cls, flag: str, env_prefix: str, missing_bucket: str) -> Origin:
        """A store named on the command line: --{flag}endpoint, keys from {env_prefix}AWS_* variables."""
        return cls(f"--{flag}endpoint", f"{env_prefix}{ENV_ACCESS} / {env_prefix}{ENV_SECRET}", missing_bucket)


@dataclass(frozen=True)
class StoreSettings:
    """One S3-compatible store: where it is, which bucket, which keys, how to transfer."""

    endpoint: str
    region: str
    bucket: str
    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)
    addressing_style: str = "path"
    part_size: int = 32 * MiB
    concurrency: int = 8
    connect_timeout: float = 5.0
    read_timeout: float = 60.0
    retries: int = 3
    origin: Origin = field(default=Origin(), compare=False, repr=False)  # fixes name what the user set

    @classmethod
    def from_config(cls, cfg: StorageConfig, access_key: str, secret_key: str, **tuning) -> StoreSettings:
        """Settings from a stack's storage section and its resolved secrets."""
        return cls(cfg.endpoint, cfg.region, cfg.bucket, access_key, secret_key, cfg.addressing_style, **tuning)

    @classmethod
    def from_stack(cls, stack: Stack, resolve: Resolve, **tuning) -> StoreSettings:
        """Settings from a loaded stack, its two secret references read by resolve (the caller's: env or Pulumi
        config, infra.lifecycle.secrets.resolver)."""
        cfg = stack.deployment.storage
        ak = resolve(cfg.access_key_id, SecretField.S3_ACCESS)
        sk = resolve(cfg.secret_access_key, SecretField.S3_SECRET)
        return cls.from_config(cfg, ak, sk, **tuning)

    @classmethod
    def from_env(cls, endpoint: str, region: str, bucket: str, addressing_style: str = "path",
                 prefix: str = "", **tuning) -> StoreSettings:
        """Settings for an explicit endpoint; keys from {prefix}AWS_ACCESS_KEY_ID / {prefix}AWS_SECRET_ACCESS_KEY."""
        names = (prefix + ENV_ACCESS, prefix + ENV_SECRET)
        missing = [n for n in names if not os.environ.get(n)]
        if missing:
            raise StorageError(f"{' and '.join(missing)} not set", f"export {missing[0]}=... (the store's keys)",
                               where=endpoint)
        return cls(endpoint, region, bucket, os.environ[names[0]], os.environ[names[1]], addressing_style, **tuning)

    def with_bucket(self, bucket: str) -> StoreSettings:
        """The same store, another bucket."""
        return replace(self, bucket=bucket)

    def same_store(self, other: StoreSettings) -> bool:
        """True when both point at the same endpoint with the same keys (server-side copy works)."""
        return (self.endpoint.rstrip("/"), self.access_key, self.secret_key) == (
            other.endpoint.rstrip("/"), other.access_key, other.secret_key)

    def part_size_for(self, size: int) -> int:
        """The part size for an object: the configured one, raised so an object fits in 10,000 parts."""
        need = -(-size // MAX_PARTS)
        return max(self.part_size, 5 * MiB, -(-need // MiB) * MiB)

    def where(self, key: str = "") -> str:
        """s3://bucket/key at endpoint, for messages."""
        return f"s3://{self.bucket}/{key} at {self.endpoint}"

    def client(self):
        """An S3 client (botocore's, what boto3 hands out) with the settings S3-compatible endpoints need.

        See docs/facts.md (S3-compatible servers).
        """
        from botocore.config import Config

        # when_required: otherwise botocore adds CRC32 trailers and validates ranged GETs, which
        # S3-compatible servers (rclone, MinIO gateways) reject or return without checksums.
        cfg = Config(signature_version="s3v4", s3={"addressing_style": self.addressing_style},
                     response_checksum_validation="when_required", request_checksum_calculation="when_required",
                     max_pool_connections=max(10, self.concurrency + 4), tcp_keepalive=True,
                     connect_timeout=self.connect_timeout, read_timeout=self.read_timeout,
                     retries={"max_attempts": self.retries, "mode": "standard"})
        client = _session().create_client(
            "s3", endpoint_url=self.endpoint, region_name=self.region, config=cfg,
            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key)
        for op in ("UploadPart", "PutObject"):
            client.meta.events.register(f"before-sign.s3.{op}", _unsigned_payload)
        return client


@functools.lru_cache(maxsize=1)
def _session():
    """One botocore session per process: a new one re-reads botocore's endpoint data (~0.2 s a client).

    botocore's own, not boto3's: importing boto3 (s3transfer, resources) costs a short command
    about a third of its start-up, and its clients are botocore's anyway.
    """
    import botocore.session

    return botocore.session.get_session()


def _unsigned_payload(request, **_: object) -> None:
    """Sign headers, not the body, of data uploads.

    Over http botocore otherwise sha256-hashes every part just to sign it (auth.py,
    _should_sha256_sign_payload), a second full hash on top of ours; integrity comes from our own
    end-to-end sha256 (manifest, verify). UNSIGNED-PAYLOAD is part of SigV4 (AWS docs, "Signature
    calculations for the Authorization header: transferring payload in a single chunk").
    """
    request.headers["X-Amz-Content-SHA256"] = "UNSIGNED-PAYLOAD"


_AUTH = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken", "403"}
# What a store's error text may echo of the request: SigV4 fields, the Authorization scheme, and
# hex runs (signatures, payload hashes). Removed before any of its text reaches a message.
_ECHOED = re.compile(r"(?i)(credential|signature|signedheaders|x-amz-security-token|authorization)"
                     r"\s*[=:]\s*[^\s,&<\"']*|aws4-hmac-sha256|\b[0-9a-f]{32,}\b")


@contextlib.contextmanager
def s3_errors(settings: StoreSettings, key: str = "", action: str = "access") -> Iterator[None]:
    """Turn boto/network failures into a StorageError naming the store, what happened and the fix."""
    from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

    where = settings.where(key)
    try:
        yield
    except ClientError as e:
        code = str(e.response.get("Error", {}).get("Code", ""))
        raise _client_error(code, str(e), settings, where, action) from None
    except EndpointConnectionError:
        raise StorageError(f"cannot {action}: endpoint {settings.endpoint} is not reachable",
                           f"check {settings.origin.endpoint} and that the store is up", where=where) from None
    except BotoCoreError as e:
        raise StorageError(f"cannot {action}: {scrub(str(e), settings)}",
                           f"check {settings.origin.endpoint} and the network", where=where) from None


def scrub(text: str, s: StoreSettings, limit: int = 300) -> str:
    """A store's error text without the keys or anything of the signed request it may echo, cut to `limit`."""
    for secret in (s.secret_key, s.access_key):
        if secret:
            text = text.replace(secret, "[redacted]")
    text = _ECHOED.sub("[redacted]", text)
    return text if len(text) <= limit else text[:limit] + "…"


def _client_error(code: str, text: str, s: StoreSettings, where: str, action: str) -> StorageError:
    if code in _AUTH:
        return StorageError(f"cannot {action}: the store rejected the credentials ({code})",
                            f"check {s.origin.keys}", where=where)
    if code in ("NoSuchBucket", "404") and action != "read object":
        return StorageError(f"bucket {s.bucket} does not exist at {s.endpoint}", s.origin.missing_bucket, where=where)
    if code == "InvalidBucketName":
        return StorageError(f"the endpoint rejects bucket name {s.bucket!r}: {scrub(text.split(': ', 1)[-1], s)}",
                            "use 3-63 lowercase letters, digits and hyphens", where=where)
    if code in ("NoSuchKey", "404"):
        return StorageError(f"cannot {action}: object not found", "push the model first", where=where)
    return StorageError(f"cannot {action}: {scrub(text, s)}", "check the store's logs and storage settings",
                        where=where)
