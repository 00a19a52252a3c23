"""Check a stored model against its manifest (every byte re-hashed, both digests), and list the models of a bucket."""
from __future__ import annotations

import time
from dataclasses import dataclass

from infra.storage import remote as rm
from infra.storage.engine import Cancelled, Pool, drive
from infra.storage.manifest import MANIFEST_NAME, Manifest, model_key
from infra.storage.progress import Meter
from infra.storage.settings import StoreSettings
from infra.storage.transfer import Store, hash_object


@dataclass(frozen=True)
class BadFile:
    """One file that does not match the manifest, and how."""

    path: str
    problem: str


@dataclass(frozen=True)
class VerifyResult:
    """The outcome of verify: the manifest and every file that does not match it."""

    manifest: Manifest
    bad: tuple[BadFile, ...]
    bytes_read: int
    seconds: float

    @property
    def ok(self) -> bool:
        """True when every file matches."""
        return not self.bad


def verify(settings: StoreSettings, prefix: str, show: bool | None = None) -> VerifyResult:
    """Re-read every object of a model and compare its size, sha256, xxh3-128 and part digests with the manifest."""
    t0 = time.monotonic()
    store = Store.of(settings)
    manifest = rm.read_manifest(store, prefix)
    sizes = rm.list_sizes(store, prefix)
    bad = [BadFile(e.path, "missing") for e in manifest.files if e.path not in sizes]
    bad += [BadFile(e.path, f"size {sizes[e.path]} != {e.size}") for e in manifest.files
            if e.path in sizes and sizes[e.path] != e.size]
    check = [e for e in manifest.files if sizes.get(e.path) == e.size]
    meter = Meter(f"verify {prefix}", sum(e.size for e in check), show)
    try:
        with Pool(settings.concurrency) as pool:
            futures = drive(hash_object(pool, store, model_key(prefix, e.path), e.size, meter, e.part_size)
                            for e in check)
            for e, fut in zip(check, futures):
                try:
                    sha, xxh, parts = fut.result()
                except Cancelled:
                    continue
                except Exception:  # noqa: BLE001 - the pool's first error is raised below
                    continue
                if sha != e.sha256:
                    bad.append(BadFile(e.path, f"sha256 {sha[:12]}… != manifest {e.sha256[:12]}…"))
                elif e.xxh3_128 and xxh != e.xxh3_128:  # what pulls check: a wrong one would fail every pull
                    bad.append(BadFile(e.path, f"xxh3-128 {xxh[:12]}… != manifest {e.xxh3_128[:12]}…"))
                elif parts != e.parts:  # what pulls check part by part
                    first = next(i for i, (a, b) in enumerate(zip(parts, e.parts)) if a != b)
                    bad.append(BadFile(e.path, f"part {first + 1} xxh3-128 != manifest"))
    finally:
        meter.close()  # also stops its progress lines
    real = [e for e in pool.errors if not isinstance(e, Cancelled)]
    if real:
        raise real[0]
    return VerifyResult(manifest, tuple(sorted(bad, key=lambda b: b.path)), meter.done, time.monotonic() - t0)


@dataclass(frozen=True)
class StoredModel:
    """A model prefix in a bucket: complete (with a manifest) or not."""

    prefix: str
    files: int
    total: int
    complete: bool
    created: str = ""


def ls(settings: StoreSettings, prefix: str = "") -> list[StoredModel]:
    """The models under a prefix of the bucket: those with a manifest, and folders without one (incomplete)."""
    store = Store.of(settings)
    sizes = rm.list_sizes(store, prefix)
    manifests = sorted(p.removesuffix(MANIFEST_NAME).rstrip("/") for p in sizes
                       if p == MANIFEST_NAME or p.endswith("/" + MANIFEST_NAME))
    out = []
    for rel in manifests:
        m = rm.read_manifest(store, _join(prefix, rel))
        out.append(StoredModel(_join(prefix, rel), len(m.files), m.total, True, m.created))
    for top, found in sorted(_loose(sizes, manifests).items()):
        out.append(StoredModel(_join(prefix, top), len(found), sum(found), False))
    return out


def _join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p.strip("/"))


def _loose(sizes: dict[str, int], manifests: list[str]) -> dict[str, list[int]]:
    """Sizes of objects outside every complete model, grouped by their top-level folder."""
    if "" in manifests:
        return {}
    claimed = tuple(m + "/" for m in manifests)
    groups: dict[str, list[int]] = {}
    for path, size in sizes.items():
        if not path.startswith(claimed):
            groups.setdefault(path.split("/", 1)[0] if "/" in path else "", []).append(size)
    return groups
