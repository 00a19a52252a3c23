"""Check every file of the weights manifest (MANIFEST: path, size, sha256) under WEIGHTS_DIR; stdlib only.

With a node cache (CACHE_DIR), WEIGHTS_DIR is the fetch's link to CACHE_DIR/<sha256 of the manifest>: a fresh copy
is checked in its staging folder, then moved there whole, with a record of its files' sizes and times that the
next pod's fetch compares before using it again.
"""
import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

MANIFEST = os.environ["MANIFEST"]
HEX64 = re.compile(r"[0-9a-f]{64}")
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
RESERVED = {MANIFEST, ".verified", ".manifest.new", ".inferry-manifest", ".files"}
ALIVE_EVERY_S = 60  # how often a staging folder being checked is touched; the fetch's rule for "abandoned" is 30 min


def problems(root, entries):
    """What differs between the folder and the manifest's entries (empty: every file matches), and the paths of the
    files that are there but do not match."""
    bad, damaged, to_hash = [], [], []
    for entry in entries:
        rel = entry["path"]
        parts = rel.split("/") if isinstance(rel, str) else [""]
        # The manifest comes from the bucket: whoever can write it must not reach past the model folder.
        if CONTROL.search("".join(parts)) or rel.startswith("/") or rel in RESERVED or \
                any(p in ("", ".", "..") for p in parts):
            bad.append(f"{ascii(rel)}: refused: the path leaves the model folder or is not a plain relative path "
                       "(absolute, '..', an empty part, a control character, or inferry's own file)")
            continue
        if not isinstance(entry["sha256"], str) or not HEX64.fullmatch(entry["sha256"]) \
                or type(entry["size"]) is not int:
            bad.append(f"{ascii(rel)}: its sha256 is not 64 lowercase hex digits or its size not an integer")
            continue
        path = os.path.join(root, rel)
        if not os.path.isfile(path) or os.path.getsize(path) != entry["size"]:
            bad.append(f"{rel}: missing or not {entry['size']} bytes")
            damaged += [path] if os.path.isfile(path) else []
            continue
        to_hash.append((rel, path, entry["sha256"]))
    # hashlib lets go of the GIL while it hashes a block: the files are hashed side by side, one per core.
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        digests = list(pool.map(lambda item: sha256_file(item[1]), to_hash))
    differ = [(rel, path) for (rel, path, want), got in zip(to_hash, digests) if got != want]
    return bad + [f"{rel}: sha256 differs from the manifest" for rel, _ in differ], damaged + [p for _, p in differ]


def sha256_file(path):
    """The file's sha256, read in 16 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 24), b""):
            h.update(block)
    return h.hexdigest()


def prune(root, paths):
    """Remove what the store held beside the manifest's files: only the manifest's files are kept or read."""
    keep = set(paths) | {MANIFEST}
    folders = set()  # every folder on the way to a kept file
    for rel in keep:
        while rel := os.path.dirname(rel):
            folders.add(rel)
    for here, dirs, files in os.walk(root, topdown=False):
        for name in files + dirs:
            path = os.path.join(here, name)
            rel = os.path.relpath(path, root)
            if rel in keep or (name in dirs and rel in folders and not os.path.islink(path)):
                continue
            print(f"weights: removing {ascii(rel)}: in the store but not in {MANIFEST}")
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)


def stat_record(root, paths):
    """sha256 of one 'size mtime inode' line per file: what fetch-weights.sh computes with stat -c '%s %Y %i'."""
    lines = []
    for rel in paths:
        st = os.stat(os.path.join(root, rel))
        lines.append(f"{st.st_size} {int(st.st_mtime)} {st.st_ino}\n")
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def verify(root, digest_wanted=None):
    """Check root against its manifest; exit 1 naming each difference. Returns (digest, manifest entries)."""
    raw = open(os.path.join(root, MANIFEST), "rb").read()
    digest = hashlib.sha256(raw).hexdigest()
    if digest_wanted is not None and digest != digest_wanted:
        sys.exit(f"the weights manifest in the store changed while it was fetched ({digest_wanted} then {digest}): "
                 "the pod fetches again when it restarts")
    entries = json.loads(raw)["files"]
    bad, damaged = problems(root, entries)
    if bad:
        # The fetch's sync skips a file of the right size that is newer than the store's: left in place, a damaged
        # one would fail every restart of the pod. Removed, the restart fetches it again.
        for path in damaged:
            os.remove(path)
        print(f"weights do not match {MANIFEST}:", *bad, sep="\n  ", file=sys.stderr)
        if damaged:
            print(f"removed {len(damaged)} that did not match: the pod's restart fetches them again", file=sys.stderr)
        sys.exit(1)
    return digest, entries


def plain(root):
    """A pod's own weights folder: checked once, then marked with the manifest's digest."""
    marker = os.path.join(root, ".verified")
    digest = hashlib.sha256(open(os.path.join(root, MANIFEST), "rb").read()).hexdigest()
    if os.path.exists(marker) and open(marker).read().strip() == digest:
        print(f"weights: verified earlier against manifest {digest}")
        return
    digest, entries = verify(root)
    prune(root, [e["path"] for e in entries] + [".manifest.new"])
    with open(marker, "w") as fh:
        fh.write(digest)
    print(f"weights: {len(entries)} files match manifest {digest}")


@contextlib.contextmanager
def alive(folder):
    """Touch folder now and every ALIVE_EVERY_S while the block runs. Another pod's fetch on this node removes a
    staging folder nothing was written in for 30 minutes, and checking a large model writes nothing."""
    done = threading.Event()

    def touch():
        while True:
            with contextlib.suppress(OSError):
                os.utime(folder)
            if done.wait(ALIVE_EVERY_S):
                return

    keeper = threading.Thread(target=touch, daemon=True)
    keeper.start()
    try:
        yield
    finally:
        done.set()
        keeper.join()


def cached(cache, link):
    """The node's copy the fetch linked: in use already (the fetch compared its record), or checked and kept."""
    kept = os.readlink(link)
    digest = os.path.basename(kept)
    marker = os.path.join(kept, ".verified")
    stage = os.path.join(cache, ".incoming", f"{digest}.{os.uname().nodename}")
    if os.path.isfile(marker):
        os.utime(marker)  # most recently used: the fetch's eviction keeps it longest
        shutil.rmtree(stage, ignore_errors=True)  # fetched while another pod on this node kept the same copy
        print(f"weights: the node's copy of manifest {digest} is unchanged since it was verified")
        return
    with alive(stage):
        digest, entries = verify(stage, digest)
        paths = [e["path"] for e in entries]
        prune(stage, paths)
    with open(os.path.join(stage, ".files"), "w") as fh:
        fh.writelines(p + "\n" for p in paths)
    with open(os.path.join(stage, ".verified"), "w") as fh:
        fh.write(f"{digest}\n{stat_record(stage, paths)}\n")
    try:
        os.rename(stage, kept)
    except OSError:  # another pod on this node kept the same manifest first: use its copy
        shutil.rmtree(stage)
    print(f"weights: {len(entries)} files match manifest {digest}; kept on this node")


if __name__ == "__main__":
    if os.environ.get("CACHE_DIR"):
        cached(os.environ["CACHE_DIR"], os.environ["WEIGHTS_DIR"])
    else:
        plain(os.environ["WEIGHTS_DIR"])
