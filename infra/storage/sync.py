"""Push, pull and copy models, resumable and verified; skip what is already there.

Verified in flight, never by re-listing (on some stores a LIST re-hashes every object):
pull and cross-store copy hash the bytes they receive and compare with the manifest before
a file counts as done; push hashes each file first and refuses it if it changed while being
sent; a server-side copy is the store's own. `verify` re-reads everything on demand.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from infra.errors import InferryError, StorageError
from infra.storage import remote as rm
from infra.storage.download import download
from infra.storage.engine import Cancelled, FileJob, Pool, drive
from infra.storage.journal import Journal
from infra.storage.local import HashCache, list_files, require_weights
from infra.storage.manifest import MANIFEST_NAME, FileEntry, Manifest, model_key
from infra.storage.progress import Meter
from infra.storage.settings import StoreSettings
from infra.storage.transfer import SERVER_COPY_MAX, Store, server_copy
from infra.storage.upload import open_uploads, stream_copy, sweep, upload


@dataclass(frozen=True)
class SyncResult:
    """What a push, pull or copy did."""

    manifest: Manifest
    transferred: tuple[str, ...]
    skipped: tuple[str, ...]
    bytes_moved: int
    seconds: float
    resumed: int = 0  # bytes of the transferred files an interrupted run had already moved (not moved again)

    @property
    def summary(self) -> str:
        """One line for the CLI."""
        rate = self.bytes_moved / self.seconds / 1e6 if self.seconds else 0.0
        kept = f" ({self.resumed / 1e6:,.1f} MB resumed from an interrupted run)" if self.resumed else ""
        return (f"{len(self.transferred)} file(s) transferred, {len(self.skipped)} already there, "
                f"{self.bytes_moved / 1e6:,.1f} MB in {self.seconds:.2f}s ({rate:,.1f} MB/s){kept}")


def _wait(pool: Pool, futures: list[Future], what: str) -> None:
    """Wait for every file; raise the first real error (an InferryError as is)."""
    for f in futures:
        try:
            f.result()
        except Exception:  # noqa: BLE001 - collected from pool.errors below
            pool.stop()
    errors = [e for e in pool.errors if not isinstance(e, Cancelled)]
    if errors:
        first = errors[0]
        if isinstance(first, InferryError):
            raise first
        if isinstance(first, OSError) and first.filename:  # local: a re-run alone does not help
            raise StorageError(f"{what} failed: {first.strerror}: {first.filename2 or first.filename}",
                               "remove or fix what is in the way in the local folder, then run the same command "
                               "again: it resumes") from None
        raise StorageError(f"{what} failed: {first}", "run the same command again: it resumes") from first


def _run(settings: StoreSettings, label: str, total: int, show: bool | None,
         start: Callable[[Pool, Meter], list[Future]]) -> tuple[int, int]:
    """Run one batch of file transfers on a pool with a progress meter; (bytes moved, bytes resumed)."""
    meter = Meter(label, total, show)
    try:
        with Pool(settings.concurrency) as pool:
            futures: list[Future] = []
            try:
                futures = start(pool, meter)
            except (InferryError, OSError) as e:
                pool.stop()
                _wait(pool, futures, label)
                if isinstance(e, OSError):  # a local file vanished or is unreadable/unwritable
                    raise StorageError(f"{label}: {e.strerror}: {e.filename}", "check the local folder") from None
                raise
            _wait(pool, futures, label)
    finally:
        meter.close()
    return meter.done, meter.resumed


def push(settings: StoreSettings, folder: Path, prefix: str, show: bool | None = None,
         repair: Collection[str] = ()) -> SyncResult:
    """Upload a local model folder to s3://bucket/prefix; the manifest goes last.

    Files are hashed (or taken from the hash cache) one ahead of the uploads, so hashing a new
    model overlaps with sending it. Files named in `repair` are sent even when the store seems to
    hold them (same size and sha256 on record): what `verify` found corrupt.
    """
    t0, folder = time.monotonic(), Path(folder)
    files = list_files(folder)
    require_weights(folder, files)
    _check_repair(repair, {rel for rel, _ in files}, str(folder))
    store = Store.of(settings)
    remote = rm.remote_model(store, prefix)
    before = open_uploads(store, prefix)  # swept once the push succeeds, unless it resumed them
    cache, journal = HashCache(folder, settings.part_size_for), Journal(settings, prefix)
    entries: list[FileEntry] = []
    todo: list[FileEntry] = []
    dropped = [remote.manifest is None]

    def start(pool: Pool, meter: Meter) -> list[Future]:
        def jobs() -> Iterator[FileJob]:
            with ThreadPoolExecutor(1) as hasher:
                for e in hasher.map(lambda f: cache.entry(*f), files):
                    entries.append(e)
                    if e.path not in repair and rm.already_there(store, remote, [e], 1, journal):
                        continue
                    if not dropped[0]:  # a model being changed must not look complete meanwhile
                        rm.drop_manifest(store, prefix)
                        dropped[0] = True
                    journal.forget([e.path])
                    todo.append(e)
                    key = model_key(prefix, e.path)
                    yield _journaled(journal, e, upload(pool, store, folder / e.path, key, e, meter, journal))

        return drive(jobs(), width=max(4, settings.concurrency))  # small files: one PUT each, keep workers busy

    pending = sum(st.st_size for rel, st in files if rel in repair or remote.sizes.get(rel) != st.st_size)
    try:
        moved, resumed = _run(settings, f"push {prefix}", pending, show, start)
    finally:
        cache.save()
        journal.flush()
    sweep(store, before, journal)
    manifest = Manifest(tuple(entries), source=f"file://{folder.resolve()}")
    present = tuple(sorted(e.path for e in entries if e not in todo))
    if not todo and remote.manifest and remote.manifest.by_path() == manifest.by_path():
        return SyncResult(remote.manifest, (), present, 0, time.monotonic() - t0)
    rm.write_manifest(store, prefix, manifest)
    return SyncResult(manifest, tuple(e.path for e in todo), present, moved, time.monotonic() - t0, resumed)


def _check_repair(repair: Collection[str], paths: set[str], where: str) -> None:
    """StorageError naming the files to repair that are not part of the model."""
    unknown = sorted(set(repair) - paths)
    if unknown:
        raise StorageError(f"--repair {', '.join(unknown)}: not a file of the model", "pass the paths as "
                           "`inferry weights verify` names them (relative to the model folder)", where=where)


def _journaled(journal: Journal, e: FileEntry, job: FileJob) -> FileJob:
    """Record the file in the journal once its transfer completes."""
    job.done.add_done_callback(lambda f: f.exception() is None and journal.record(e))
    return job


def pull(settings: StoreSettings, prefix: str, folder: Path, show: bool | None = None) -> SyncResult:
    """Download a complete model (per its manifest) into a local folder, checking every file as it arrives."""
    t0, folder = time.monotonic(), Path(folder)
    store = Store.of(settings)
    manifest = rm.read_manifest(store, prefix)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StorageError(f"cannot create folder {e.filename or folder}: {e.strerror}",
                           "pass a folder path that is not a file and can be written", where=str(folder)) from None
    cache = HashCache(folder)
    present = {e.path for e in manifest.files if _local_matches(cache, folder, e)}
    todo = [e for e in manifest.files if e.path not in present]

    def remember(e: FileEntry, job: FileJob) -> FileJob:
        # Checked while downloading: cache it, so a re-run (even after a failure) need not re-hash it.
        # A manifest from before xxh3 gives only the sha256: then a later push hashes the file itself.
        job.done.add_done_callback(lambda f: f.exception() is None and bool(e.xxh3_128) and cache.put(
            e.path, (folder / e.path).stat(), e))
        return job

    def start(pool: Pool, meter: Meter) -> list[Future]:
        return drive((remember(e, download(pool, store, model_key(prefix, e.path), e, folder / e.path, meter))
                      for e in todo), width=max(4, settings.concurrency))

    try:
        moved, resumed = _run(settings, f"pull {prefix}", sum(e.size for e in todo), show, start)
    finally:
        cache.save()
    (folder / MANIFEST_NAME).write_text(manifest.to_json())
    return SyncResult(manifest, tuple(e.path for e in todo), tuple(sorted(present)), moved, time.monotonic() - t0,
                      resumed)


def _local_matches(cache: HashCache, folder: Path, e: FileEntry) -> bool:
    path = folder / e.path
    try:
        st = path.stat()
    except FileNotFoundError:
        return False
    if st.st_size != e.size:
        return False
    known = cache.get(e.path, st) or cache.entry(e.path, st)  # any part size: only the sha256 counts here
    return known.sha256 == e.sha256


def copy(src: StoreSettings, src_prefix: str, dst: StoreSettings, dst_prefix: str,
         show: bool | None = None, repair: Collection[str] = ()) -> SyncResult:
    """Copy a complete model between stores: server side on one store, else streamed part by part.

    Files named in `repair` are copied even when the destination seems to hold them.
    """
    t0 = time.monotonic()
    s, d = Store.of(src), Store.of(dst)
    manifest = rm.read_manifest(s, src_prefix)
    _check_repair(repair, set(manifest.by_path()), src.where(src_prefix))
    remote = rm.remote_model(d, dst_prefix)
    before = open_uploads(d, dst_prefix)
    journal = Journal(dst, dst_prefix)
    asked = [e for e in manifest.files if e.path not in repair]
    present = rm.already_there(d, remote, asked, dst.concurrency, journal)
    todo = [e for e in manifest.files if e.path not in present]
    if not todo and remote.manifest and remote.manifest.by_path() == manifest.by_path():
        sweep(d, before, journal)
        return SyncResult(remote.manifest, (), tuple(sorted(present)), 0, time.monotonic() - t0)
    if remote.manifest:
        rm.drop_manifest(d, dst_prefix)
    journal.forget([e.path for e in todo])
    same = src.same_store(dst)

    def job(pool: Pool, meter: Meter, e: FileEntry) -> FileJob:
        how = server_copy if same and e.size <= SERVER_COPY_MAX else stream_copy
        return _journaled(journal, e, how(pool, s, model_key(src_prefix, e.path), d, model_key(dst_prefix, e.path),
                                          e, meter))

    def start(pool: Pool, meter: Meter) -> list[Future]:
        return drive(job(pool, meter, e) for e in todo)

    try:
        moved, _ = _run(dst, f"copy {src_prefix}", sum(e.size for e in todo), show, start)
    finally:
        journal.flush()
    sweep(d, before, journal)
    copied = Manifest(manifest.files, source=f"s3://{src.bucket}/{src_prefix} at {src.endpoint}")
    rm.write_manifest(d, dst_prefix, copied)
    return SyncResult(copied, tuple(e.path for e in todo), tuple(sorted(present)), moved, time.monotonic() - t0)
