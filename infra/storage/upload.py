"""Uploads part by part: a local file (resumable across runs) or a stream from another store.

A push journals each multipart upload it creates and every part the store acknowledges. A
re-run of a killed push asks the store which parts it holds (ListParts), keeps those whose size
and ETag are the ones acknowledged before (or, for a part acknowledged just before the kill,
whose ETag is the MD5 of the local bytes), sends only the rest and completes the same upload.
An upload that cannot be resumed (the file changed) is aborted; after a successful push every
upload left under the prefix from before it is aborted too, so none keeps holding storage.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from infra.errors import StorageError
from infra.storage.engine import FileJob, Pool, ranges, run_parts
from infra.storage.hashing import OrderedHasher, check_for
from infra.storage.journal import Journal, OpenUpload
from infra.storage.local import SharedFd
from infra.storage.manifest import FileEntry
from infra.storage.progress import Meter
from infra.storage.settings import MAX_PARTS, MiB, s3_errors
from infra.storage.transfer import SHA_META, Store, check_size, read_range

# Codes after which an upload can never complete: start it again rather than resume it.
_DEAD = {"NoSuchUpload", "InvalidPart", "InvalidPartOrder", "EntityTooSmall"}


class Multipart:
    """A multipart (or single PUT) upload of one object; with a journal, resumable across runs."""

    def __init__(self, store: Store, key: str, entry: FileEntry, progress: Meter, journal: Journal | None = None):
        self.store, self.key, self.entry, self.progress, self.journal = store, key, entry, progress, journal
        self.part_size = store.settings.part_size_for(entry.size)
        self.single = entry.size <= self.part_size
        self.upload_id: str | None = None
        self.kept: dict[int, str] = {}  # part number -> ETag of parts the store already holds (resumed)

    def begin(self, path: Path | None = None) -> None:
        """Resume this file's journaled upload when the store still holds it, else create one if needed."""
        if self.journal is not None and path is not None and self._resume(path):
            return
        if self.single:
            return
        with s3_errors(self.store.settings, self.key, "start upload"):
            self.upload_id = self.store.s3.create_multipart_upload(
                Bucket=self.store.settings.bucket, Key=self.key, Metadata={SHA_META: self.entry.sha256})["UploadId"]
        if self.journal is not None:
            self.journal.begin_upload(OpenUpload(self.entry.path, self.key, self.upload_id, self.entry.size,
                                                 self.entry.sha256, self.part_size))

    def _resume(self, path: Path) -> bool:
        u = self.journal.uploads.get(self.entry.path)
        if u is None:
            return False
        if not u.carries(self.entry, self.key) or not _fits(u.part_size, self.entry.size):
            abort_upload(self.store, u.key, u.upload_id)  # stale: other content; nothing can complete it
            self.journal.end_upload(self.entry.path)
            return False
        listed = list_parts(self.store, self.key, u.upload_id)
        if listed is None:  # the store dropped it (expired, aborted, restarted) or cannot list parts
            abort_upload(self.store, u.key, u.upload_id)
            self.journal.end_upload(self.entry.path)
            return False
        self.upload_id, self.part_size, self.single = u.upload_id, u.part_size, False
        self.kept = _verified(listed, self.journal.parts(u.upload_id), path, self.entry.size, u.part_size)
        self.journal.resumed.add(u.upload_id)
        return True

    def send(self, index: int, data: bytes | memoryview) -> dict:
        """Upload one part (or the whole object); journal the part once the store acknowledged it."""
        s, b = self.store.settings, self.store.settings.bucket
        data = bytes(data) if isinstance(data, memoryview) else data  # botocore wants bytes or a file
        with s3_errors(s, self.key, "upload"):
            if self.single:
                self.store.s3.put_object(Bucket=b, Key=self.key, Body=data, Metadata={SHA_META: self.entry.sha256})
                etag = ""
            else:
                etag = self.store.s3.upload_part(Bucket=b, Key=self.key, UploadId=self.upload_id,
                                                 PartNumber=index + 1, Body=data)["ETag"]
        if self.journal is not None and self.upload_id:
            self.journal.part_done(self.upload_id, index + 1, etag)
        self.progress(len(data))
        return {"PartNumber": index + 1, "ETag": etag}

    def complete(self, parts: list[dict]) -> None:
        """Complete the multipart upload with the parts just sent and those kept from an earlier run."""
        if not self.upload_id:
            return
        from botocore.exceptions import ClientError

        every = sorted([*parts, *({"PartNumber": n, "ETag": e} for n, e in self.kept.items())],
                       key=lambda p: p["PartNumber"])
        with s3_errors(self.store.settings, self.key, "complete upload"):
            try:
                self.store.s3.complete_multipart_upload(Bucket=self.store.settings.bucket, Key=self.key,
                                                        UploadId=self.upload_id, MultipartUpload={"Parts": every})
            except ClientError as e:
                if e.response.get("Error", {}).get("Code") in _DEAD:
                    self.abort()  # resuming it would fail the same way: the next run starts afresh
                raise
        if self.journal is not None:
            self.journal.end_upload(self.entry.path)

    def abort(self, _err: BaseException | None = None) -> None:
        """Abort an unfinished multipart upload (best effort: the store may be down) and forget it."""
        if self.upload_id:
            abort_upload(self.store, self.key, self.upload_id)
            if self.journal is not None:
                self.journal.end_upload(self.entry.path)


def _fits(part_size: int, size: int) -> bool:
    """True when a journaled part size is still a valid multipart layout for the size."""
    return part_size >= 5 * MiB and part_size < size and -(-size // part_size) <= MAX_PARTS


def list_parts(store: Store, key: str, upload_id: str) -> dict[int, tuple[str, int]] | None:
    """{part number: (ETag, size)} the store holds for an open upload; None when it has none (or cannot say)."""
    from botocore.exceptions import ClientError

    found: dict[int, tuple[str, int]] = {}
    with s3_errors(store.settings, key, "list the parts of an upload"):
        try:
            pages = store.s3.get_paginator("list_parts").paginate(Bucket=store.settings.bucket, Key=key,
                                                                    UploadId=upload_id)
            for page in pages:
                for p in page.get("Parts", []):
                    found[int(p["PartNumber"])] = (str(p["ETag"]), int(p["Size"]))
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("NoSuchUpload", "404", "NoSuchKey", "NotImplemented"):
                return None
            raise
    return found


def _verified(listed: dict[int, tuple[str, int]], logged: dict[int, str], path: Path, size: int,
              part_size: int) -> dict[int, str]:
    """The listed parts that hold this file's bytes: right size, and the ETag acknowledged or the local MD5."""
    expect = {i + 1: (offset, length) for i, offset, length in ranges(size, part_size)}
    kept = {}
    for number, (etag, got) in listed.items():
        offset, length = expect.get(number, (0, -1))
        if got == length and (logged.get(number) == etag or _md5_is(path, offset, length, etag)):
            kept[number] = etag
    return kept


def _md5_is(path: Path, offset: int, length: int, etag: str) -> bool:
    """True when the ETag is the MD5 of the local bytes (a part acknowledged but not yet journaled)."""
    want = etag.strip('"').lower()
    if len(want) != 32:  # not a plain MD5 (encrypted or composite): send the part again
        return False
    md5 = hashlib.md5(usedforsecurity=False)
    with open(path, "rb", buffering=0) as f:
        f.seek(offset)
        left = length
        while left and (data := f.read(min(8 * MiB, left))):
            md5.update(data)
            left -= len(data)
    return not left and md5.hexdigest() == want


def abort_upload(store: Store, key: str, upload_id: str) -> None:
    """Abort a multipart upload (best effort: it may be gone already, or the store down)."""
    try:
        store.s3.abort_multipart_upload(Bucket=store.settings.bucket, Key=key, UploadId=upload_id)
    except Exception:  # noqa: BLE001 - nothing more to do; the object was never completed
        pass


def open_uploads(store: Store, prefix: str) -> dict[str, str]:
    """{upload id: key} of the multipart uploads open under a model prefix ({} when the store cannot list them)."""
    from botocore.exceptions import BotoCoreError, ClientError

    base = prefix.strip("/") + "/" if prefix.strip("/") else ""
    found: dict[str, str] = {}
    try:
        for page in store.s3.get_paginator("list_multipart_uploads").paginate(Bucket=store.settings.bucket,
                                                                              Prefix=base):
            found |= {u["UploadId"]: u["Key"] for u in page.get("Uploads", [])}
    except (ClientError, BotoCoreError):
        return {}  # the sweep is best effort: a store without the call keeps its own expiry
    return found


def sweep(store: Store, before: dict[str, str], journal: Journal) -> int:
    """After a successful run: abort the uploads open before it that it did not resume, and every journaled one.

    None of them can complete any more: the model is whole, and a later change starts new uploads.
    Uploads other clients started during the run were not listed before it, so they are left alone.
    """
    stale = {uid: key for uid, key in before.items() if uid not in journal.resumed}
    for u in list(journal.uploads.values()):
        stale[u.upload_id] = u.key
        journal.end_upload(u.path)
    for uid, key in stale.items():
        abort_upload(store, key, uid)
    return len(stale)


def upload(pool: Pool, store: Store, path: Path, key: str, entry: FileEntry, progress: Meter,
           journal: Journal | None = None) -> FileJob:
    """Upload a local file whose sha256 is known, resuming its journaled upload; fails if the file changes meanwhile."""
    up = Multipart(store, key, entry, progress, journal)
    up.begin(path)
    todo = [r for r in ranges(entry.size, up.part_size) if r[0] + 1 not in up.kept]
    if up.kept:
        progress.kept(entry.size - sum(length for _, _, length in todo))
    file = SharedFd(path, os.O_RDONLY)
    before = os.fstat(file.fd)

    def part(index: int, offset: int, length: int) -> dict:
        with file.use() as fd:
            data = os.pread(fd, length, offset)
        return up.send(index, data)

    def finish(parts: list[dict]) -> None:
        after = os.fstat(file.fd)
        file.release()
        if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns) or after.st_size != entry.size:
            up.abort()
            raise StorageError(f"{path} changed while it was uploaded", "run the push again", where=str(path))
        up.complete(parts)

    def failed(err: BaseException) -> None:
        file.release()
        if journal is None:
            up.abort(err)  # else the upload stays open and journaled: the next run resumes it

    return run_parts(pool, todo, part, finish, failed)


def stream_copy(pool: Pool, src: Store, src_key: str, dst: Store, dst_key: str, entry: FileEntry,
                progress: Meter) -> FileJob:
    """Copy an object between stores part by part (ranged GET -> upload part), checking its digest."""
    up = Multipart(dst, dst_key, entry, progress)
    up.begin()
    check = check_for(entry)
    hasher = OrderedHasher(new=check.new)

    def part(index: int, offset: int, length: int) -> dict:
        data = read_range(src, src_key, offset, length)
        hasher.feed(index, data)
        return up.send(index, data)

    def finish(parts: list[dict]) -> None:
        got = hasher.hexdigest()
        if got != check.want:
            up.abort()
            if up.single:
                dst.s3.delete_object(Bucket=dst.settings.bucket, Key=dst_key)
            raise StorageError(f"{entry.path}: source {check.name} {got[:12]}… does not match its manifest",
                               "the source object is corrupt: push the model to the source again",
                               where=src.settings.where(src_key))
        up.complete(parts)

    def failed(err: BaseException) -> None:
        hasher.fail(err)
        up.abort(err)

    return run_parts(pool, ranges(entry.size, up.part_size), part, finish, failed,
                     ready=pool.lookup(check_size, src, src_key, entry.size))
