"""Presigned SigV4 GET URLs for a model's files: a GPU host fetches with curl, never holding S3 keys."""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from infra.errors import StorageError
from infra.storage import remote as rm
from infra.storage.manifest import MANIFEST_NAME, Manifest, manifest_key, model_key
from infra.storage.settings import StoreSettings, s3_errors
from infra.storage.transfer import Store

MAX_EXPIRES_S = 7 * 24 * 3600  # SigV4 presigned URLs are valid for at most 7 days


@dataclass(frozen=True)
class PresignedFile:
    """One file of a model with a URL that GETs it until the expiry."""

    path: str
    size: int
    sha256: str
    url: str = field(repr=False)  # a bearer credential until it expires


def _curl_config(url: str) -> str:
    """printf of a curl config line `url = "URL"` (presigned URLs are percent-encoded: no quote or backslash)."""
    line = 'url = "' + url + '"'
    return f"printf '%s\\n' {shlex.quote(line)}"


@dataclass(frozen=True)
class PresignedModel:
    """A model's manifest plus a presigned GET URL per file (and one for the manifest)."""

    prefix: str
    manifest: Manifest
    files: tuple[PresignedFile, ...]
    manifest_url: str = field(repr=False)
    expires_at: datetime

    def fetch_script(self, dest: str) -> str:
        """A POSIX sh script that downloads every file into dest with curl and checks its sha256.

        The URLs are bearer credentials: curl reads each from its config on stdin (`-K -`, fed by the printf
        builtin), so no curl command line that `ps` shows carries one; the script itself must stay private.
        """
        d = shlex.quote(dest.rstrip("/"))
        lines = ["set -eu", f"mkdir -p {d}"]
        for f in self.files:
            target = f"{d}/{shlex.quote(f.path)}"
            lines.append(f"mkdir -p \"$(dirname {target})\"")
            lines.append(f"{_curl_config(f.url)} | curl -fsS --retry 3 -o {target}.part -K -")
            lines.append(f"echo {shlex.quote(f.sha256 + '  ' + dest.rstrip('/') + '/' + f.path + '.part')} "
                         f"| sha256sum -c --quiet -")
            lines.append(f"mv {target}.part {target}")
        lines.append(f"{_curl_config(self.manifest_url)} | curl -fsS --retry 3 -o {d}/{MANIFEST_NAME} -K -")
        return "\n".join(lines) + "\n"


def presign_model(settings: StoreSettings, prefix: str, expires_s: int = 3600) -> PresignedModel:
    """Read the model's manifest and sign a GET URL per file, valid for expires_s seconds."""
    if not 1 <= expires_s <= MAX_EXPIRES_S:
        raise StorageError(f"expiry {expires_s}s is out of range", f"use 1..{MAX_EXPIRES_S} seconds (7 days)",
                           where=settings.where(prefix))
    store = Store.of(settings)
    manifest = rm.read_manifest(store, prefix)

    def sign(key: str) -> str:
        with s3_errors(settings, key, "presign"):
            return store.s3.generate_presigned_url("get_object", Params={"Bucket": settings.bucket, "Key": key},
                                                   ExpiresIn=expires_s)

    files = tuple(PresignedFile(f.path, f.size, f.sha256, sign(model_key(prefix, f.path))) for f in manifest.files)
    expires_at = datetime.now(timezone.utc) + timedelta(seconds=expires_s)
    return PresignedModel(prefix, manifest, files, sign(manifest_key(prefix)), expires_at)
