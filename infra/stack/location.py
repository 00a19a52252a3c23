"""Where weights live in an S3-compatible store, typed: a bucket and a key prefix (written s3://BUCKET/PREFIX)."""
from __future__ import annotations

from dataclasses import dataclass

SCHEME = "s3://"


@dataclass(frozen=True)
class WeightsLocation:
    """A model folder in a bucket; `uri` is how engines and messages write it, `parse` reads it back."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, text: str) -> WeightsLocation | None:
        """The location an s3://BUCKET/PREFIX string names; None for anything else (a path, a hub id)."""
        if not text.startswith(SCHEME):
            return None
        bucket, _, prefix = text[len(SCHEME):].partition("/")
        return cls(bucket, prefix.strip("/"))

    @property
    def uri(self) -> str:
        """s3://BUCKET/PREFIX."""
        return f"{SCHEME}{self.bucket}/{self.prefix}"

    def key_under(self, uri: str) -> str | None:
        """The key prefix of uri when it lies in this location's bucket (e.g. a build cache key); else None."""
        other = WeightsLocation.parse(uri)
        return other.prefix if other is not None and other.bucket == self.bucket else None
