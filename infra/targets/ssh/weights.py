"""Step 2 on each host: weights from the store into the host's cache with presigned URLs and curl, sha256-checked."""
from __future__ import annotations

import hashlib
import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from infra.errors import RemoteError
from infra.targets.ssh import preflight
from infra.targets.ssh.facts import parse_df
from infra.targets.ssh.oplog import Ops
from infra.targets.ssh import pool
from infra.targets.ssh.pool import Conn, session
from infra.targets.ssh.runtime import script

if TYPE_CHECKING:
    from infra.storage.presign import PresignedFile

MARKER = ".inferry-manifest"  # holds the digest of the manifest the folder was last verified against
PRESIGN_EXPIRES_S = 3600
MiB = 1 << 20
RANGE_MIN = 64 * MiB  # a smaller byte range gains less than its own request costs
PARTIAL = re.compile(r"\.part\.[0-9]+\.[0-9]+$")  # fetch.sh's REL.part.PID.K while it downloads REL
LISTING = "find . -type f -printf '%s %P\\0'"  # every file under the folder: 'SIZE PATH', NUL after each


@dataclass(frozen=True)
class Store:
    """Where the weights live (non-secret part; the keys travel as secret inputs)."""

    endpoint: str
    region: str
    bucket: str
    prefix: str
    addressing_style: str = "path"


@dataclass(frozen=True)
class WeightsArgs:
    """Inputs of the weights step."""

    conn: Conn
    store: Store
    model_dir: str  # where the engine reads the weights on the host
    parallel: int = 8
    trt_build: bool = False
    ops_log: str = "/etc/inferry/ops.log"
    keep_on_destroy: bool = False


@dataclass(frozen=True)
class WeightsReport:
    """What the weights step found and did."""

    model_dir: str
    manifest_sha256: str
    files: int
    bytes: int
    fetched: int
    writes: int
    restarts: int = 0


def manifest_digest(entries: list[PresignedFile]) -> str:
    """A digest of (path, size, sha256) of every file: equal digests mean identical weights."""
    lines = sorted(f"{e.path} {e.size} {e.sha256}" for e in entries)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def presigned(store: Store, access_key: str, secret_key: str, expires_s: int = PRESIGN_EXPIRES_S) -> list[PresignedFile]:
    """The manifest with a presigned URL per file, from the weight store (credentials stay here)."""
    from infra.storage.presign import presign_model  # the weight store owns SigV4 and manifests
    from infra.storage.settings import StoreSettings

    settings = StoreSettings(store.endpoint, store.region, store.bucket, access_key, secret_key,
                             store.addressing_style)
    return list(presign_model(settings, store.prefix, expires_s).files)


def range_bytes(fetch_bytes: int, parallel: int) -> int:
    """Bytes per ranged GET: what there is to fetch spread over twice `parallel` requests, at least RANGE_MIN.
    A store serves each connection at a bounded rate (about 0.45 GB/s from the test server here, less from a
    cloud's S3), so a model of few large shards fetched one request per file used few connections: 4 shards, 4
    connections. 2 GiB in 4 shards here (bench/fetch.py): one request per file 4.05 s, 16 ranges 3.08 s (8
    ranges 3.89 s; s5cmd 1.81 s). A model of many shards keeps one request per file."""
    return max(RANGE_MIN, -(-fetch_bytes // max(1, 2 * parallel)))


def fetch_lines(entries: list[PresignedFile], part: int) -> str:
    """fetch.sh's input: 'SHA256 SIZE RANGE PATH URL' per file (a file of about two RANGEs or more comes in ranges
    of about RANGE)."""
    return "".join(f"{e.sha256} {e.size} {part} {e.path} {e.url}\n" for e in entries)


def ensure_weights(a: WeightsArgs, private_key: str, entries: list[PresignedFile], full: bool = False) -> WeightsReport:
    """Fetch what is missing or wrong. A no-op when the folder was verified against the same manifest and every
    file has its size (cheap, every apply); full=True hashes every file again and fetches what differs."""
    digest = manifest_digest(entries)
    total = sum(e.size for e in entries)
    s = session(a.conn, private_key)
    d = shlex.quote(a.model_dir)
    probe = s.run(f"set -- {d}; {script('drop-partials.sh')}\n"  # before df: what they held is free
                  f"cat {d}/{MARKER} 2>/dev/null; echo; echo @@df; dd={d}; "
                  "while [ ! -e \"$dd\" ]; do dd=$(dirname \"$dd\"); done; echo \"$dd\"; df -Pk \"$dd\"; echo @@have; "
                  f"[ -d {d} ] && cd {d} && {LISTING}; true",
                  "read weights cache", stdin="".join(f"{e.path}\n" for e in entries))
    marker, _, rest = probe.out.partition("\n@@df\n")
    df_text, _, have_text = rest.partition("@@have\n")
    have = listed(have_text)  # looked up by the manifest's paths: a partial file is never one of them
    missing = [e for e in entries if have.get(e.path) != e.size]
    if marker.strip() == digest and not missing and not full:
        return WeightsReport(a.model_dir, digest, len(entries), total, 0, 0)
    path, free = parse_df(df_text)
    need = int(sum(e.size for e in missing) * (1 + (preflight.TRT_BUILD_FACTOR if a.trt_build else 0)))
    if need > free:
        gib = preflight.GIB
        raise RemoteError(f"preflight failed: disk: the weights need {need / gib:.2f} GiB more at {path} but only "
                          f"{free / gib:.2f} GiB is free (short by {(need - free) / gib:.2f} GiB)",
                          "free disk or point target.weights_cache at a larger volume, then apply again",
                          where=f"host {a.conn.label}")
    # What is missing by size, else (a changed manifest, or full) whatever fails its hash: at most all of it.
    lines = fetch_lines(entries, range_bytes(sum(e.size for e in missing) or total, a.parallel))
    res = s.run(f"set -- {d} {a.parallel}; {script('fetch.sh')}", "fetch weights", stdin=lines, check=False,
                timeout=24 * 3600)
    if res.code != 0:
        raise RemoteError(f"fetch weights failed: {(res.err.strip() or res.out.strip())[-800:]}",
                          "check that the host reaches the weight store endpoint and that the store holds "
                          "the files of the manifest (`inferry weights verify`), then apply again",
                          where=f"host {a.conn.label}")
    fetched = [ln[len("fetched "):] for ln in res.out.splitlines() if ln.startswith("fetched ")]
    s.put(posixpath.join(a.model_dir, MARKER), digest.encode(), 0o644, "record the weights manifest")
    ops = Ops(writes=[posixpath.join(a.model_dir, p) for p in fetched] + [posixpath.join(a.model_dir, MARKER)])
    ops.record(s, a.ops_log, "record changes")
    return WeightsReport(a.model_dir, digest, len(entries), total, len(fetched), len(ops.writes))


def listed(listing: str) -> dict[str, int]:
    """{path: size} of every file in LISTING's output."""
    rows = (row.split(" ", 1) for row in listing.strip("\n").split("\0") if " " in row)
    return {path: int(size) for size, path in rows}


def cached_files(listing: str) -> dict[str, int]:
    """{path: size} of the model's files from LISTING's output: not the marker, not a running fetch's partial files
    (a model file whose own name holds `.part.` is a model file)."""
    return {path: size for path, size in listed(listing).items() if path != MARKER and not PARTIAL.search(path)}


def weights_drift(a: WeightsArgs, private_key: str, manifest_sha256: str, files: int, total: int) -> list[str]:
    """What differs in the host's cache from the last verified fetch: the manifest marker, files, bytes."""
    d = shlex.quote(a.model_dir)
    probe = pool.read(a.conn, private_key, lambda s: s.run(
        f"cat {d}/{MARKER} 2>/dev/null; echo; echo @@have; [ -d {d} ] && cd {d} && {LISTING}; true",
        "read weights cache"))
    marker, _, listing = probe.out.partition("\n@@have\n")
    found = list(cached_files(listing).values())
    if marker.strip() != manifest_sha256:
        return [f"{a.model_dir} was not verified against the stack's manifest"]
    if len(found) < files or sum(found) < total:
        return [f"{a.model_dir} holds {len(found)} files ({sum(found)} bytes), the manifest {files} ({total})"]
    return []


def remove_weights(a: WeightsArgs, private_key: str) -> None:
    """Destroy: remove the model's folder, then the cache folders above it that are left empty (the cache stays
    when the stack keeps it: target.keep_on_destroy: [weights])."""
    if a.keep_on_destroy:
        return
    d = shlex.quote(a.model_dir)
    # rmdir only removes an empty folder: another model's cache, or a mount point, stays.
    session(a.conn, private_key).run(f"rm -rf {d}; p=$(dirname {d}); while [ \"$p\" != / ] && rmdir \"$p\" "
                                     "2>/dev/null; do p=$(dirname \"$p\"); done; true", "remove weights")
