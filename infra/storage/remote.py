"""What a store holds under a model prefix: listed sizes, the manifest, per-object sha256 metadata, single files."""
from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from infra.errors import StorageError
from infra.storage.journal import Journal
from infra.storage.manifest import MANIFEST_NAME, FileEntry, Manifest, manifest_key, model_key
from infra.storage.settings import StoreSettings, s3_errors
from infra.storage.transfer import SHA_META, Store

if TYPE_CHECKING:
    from infra.stack.secrets import Resolve
    from infra.stack.stackfile import Stack


@dataclass(frozen=True)
class RemoteModel:
    """A model prefix as stored: object sizes by relative path and the manifest, if complete."""

    prefix: str
    sizes: dict[str, int]
    manifest: Manifest | None


def list_sizes(store: Store, prefix: str) -> dict[str, int]:
    """{relative path: size} of every object under prefix/."""
    base = prefix.strip("/") + "/" if prefix.strip("/") else ""
    out: dict[str, int] = {}
    with s3_errors(store.settings, base, "list"):
        for page in store.s3.get_paginator("list_objects_v2").paginate(Bucket=store.settings.bucket, Prefix=base):
            for obj in page.get("Contents", []):
                out[obj["Key"][len(base):]] = int(obj["Size"])
    return out


def read_manifest(store: Store, prefix: str) -> Manifest:
    """The manifest of a model; StorageError when the model is missing or incomplete."""
    key = manifest_key(prefix)
    with s3_errors(store.settings, key, "read manifest"):
        try:
            body = store.s3.get_object(Bucket=store.settings.bucket, Key=key)["Body"].read()
        except store.s3.exceptions.NoSuchKey:
            raise StorageError(f"no {MANIFEST_NAME} under {prefix}: the model is missing or its push did not finish",
                               f"run `inferry weights push FOLDER --prefix {prefix}` (again)",
                               where=store.settings.where(key)) from None
    return Manifest.from_json(body, store.settings.where(key))


def remote_model(store: Store, prefix: str) -> RemoteModel:
    """Sizes and (when present) the manifest of a model prefix."""
    sizes = list_sizes(store, prefix)
    manifest = read_manifest(store, prefix) if MANIFEST_NAME in sizes else None
    sizes.pop(MANIFEST_NAME, None)
    return RemoteModel(prefix, sizes, manifest)


def stored_sha256(store: Store, key: str) -> str | None:
    """The sha256 recorded in an object's metadata (None when absent or the object is gone)."""
    from botocore.exceptions import ClientError

    with s3_errors(store.settings, key, "read object metadata"):
        try:
            meta = store.s3.head_object(Bucket=store.settings.bucket, Key=key).get("Metadata", {})
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise
    return {k.lower(): v for k, v in meta.items()}.get(SHA_META)


def already_there(store: Store, remote: RemoteModel, entries: list[FileEntry], workers: int,
                  journal: Journal | None = None) -> set[str]:
    """Paths whose object has the entry's size and sha256: per the manifest, the local journal, else metadata."""
    same_size = [e for e in entries if remote.sizes.get(e.path) == e.size]
    known = remote.manifest.by_path() if remote.manifest else {}
    present = {e.path for e in same_size if known.get(e.path) == e or (journal is not None and journal.has(e))}
    ask = [e for e in same_size if e.path not in present]
    if ask:
        with ThreadPoolExecutor(max(1, min(workers, len(ask)))) as pool:
            shas = pool.map(lambda e: stored_sha256(store, model_key(remote.prefix, e.path)), ask)
            present |= {e.path for e, sha in zip(ask, shas) if sha == e.sha256}
    return present


def write_manifest(store: Store, prefix: str, manifest: Manifest) -> None:
    """Write the manifest (last: it marks the model complete)."""
    key = manifest_key(prefix)
    with s3_errors(store.settings, key, "write manifest"):
        store.s3.put_object(Bucket=store.settings.bucket, Key=key, Body=manifest.to_json().encode(),
                            ContentType="application/json")


def drop_manifest(store: Store, prefix: str) -> None:
    """Delete a model's manifest before changing its files, so a half-changed model is never complete."""
    key = manifest_key(prefix)
    with s3_errors(store.settings, key, "delete manifest"):
        store.s3.delete_object(Bucket=store.settings.bucket, Key=key)


def model_reader(store: Store, prefix: str) -> Callable[[str], bytes | None]:
    """A reader of single files of a model folder (config.json for sizing): None when absent, store errors mapped.

    Mapped like every weights command (s3_errors): a store that echoes the request in its error
    text must not put the access key id or the signature on the terminal.
    """
    def read(name: str) -> bytes | None:
        key = model_key(prefix, name)
        try:
            with s3_errors(store.settings, key, "read"):
                try:
                    return store.s3.get_object(Bucket=store.settings.bucket, Key=key)["Body"].read()
                except store.s3.exceptions.NoSuchKey:
                    return None
        except StorageError as e:
            raise StorageError(f"could not read {name} of the model: {e.message.removeprefix('cannot read: ')}",
                               f"{e.fix}, or plan without --from-store", where=e.where) from None

    return read


def stack_reader(stack: Stack, resolve: Resolve) -> Callable[[str], bytes | None] | None:
    """`inferry plan --from-store`'s reader of the stack's model folder; None when the weights are not in a store."""
    m = stack.deployment.model
    if m.weights_prefix is None:
        return None
    return model_reader(Store.of(StoreSettings.from_stack(stack, resolve)), m.weights_prefix)


def adapter_readers(stack: Stack, resolve: Resolve) -> Callable[[str], Callable[[str], bytes | None]]:
    """A reader of each adapter folder (by its prefix) in the stack's store, errors mapped as model_reader's."""
    store = Store.of(StoreSettings.from_stack(stack, resolve))
    return lambda prefix: model_reader(store, prefix)
