"""Local model folders: list weight files and their digests, cached by (size, mtime, inode)."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from infra.errors import StorageError
from infra.storage.engine import Cancelled
from infra.storage.hashing import CHUNK, Digests
from infra.storage.manifest import MANIFEST_NAME, RESERVED, FileEntry, path_problem

# Files that make a folder a model (Hugging Face snapshot layout): at least one of these.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".engine", ".plan", ".npz", ".msgpack", ".h5")
SKIP_PARTS = {".git", ".cache", ".huggingface"}
PARTIAL_SUFFIX = ".inferry-part"  # a file being pulled
PARTS_SUFFIX = ".inferry-parts"  # beside it: which of its parts are written (download.PartLog)


def cache_dir() -> Path:
    """Where sha256 results of local files are cached (XDG cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "inferry" / "sha256"


def list_files(root: Path) -> list[tuple[str, os.stat_result]]:
    """(relative posix path, stat) of every regular file of a model folder, sorted."""
    if not root.is_dir():
        raise StorageError(f"{root} is not a folder", "pass the model folder (a Hugging Face snapshot)", where=str(root))
    found = []
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if (SKIP_PARTS & set(rel.parts) or path.name == MANIFEST_NAME or rel.as_posix() in RESERVED
                or path.name.endswith((PARTIAL_SUFFIX, PARTS_SUFFIX))):
            continue
        if path.is_symlink() and not path.exists():  # a Hugging Face snapshot links to blobs: one is missing
            raise StorageError(f"{rel.as_posix()} is a broken link (an unfinished download?)",
                               "download the model again, or remove the link", where=str(path))
        if path.is_file():
            why = path_problem(rel.as_posix())
            if why:  # every host and pull would refuse the manifest: refuse it before anything moves
                raise StorageError(f"{ascii(rel.as_posix())}: {why}; hosts refuse such a manifest entry",
                                   "rename or remove the file", where=str(root))
            found.append((rel.as_posix(), path.stat()))
    return sorted(found)


def require_weights(root: Path, files: list[tuple[str, os.stat_result]]) -> None:
    """StorageError unless the folder holds at least one weight file."""
    if not any(p.endswith(WEIGHT_SUFFIXES) for p, _ in files):
        raise StorageError(f"{root} holds no weight files ({', '.join(WEIGHT_SUFFIXES[:3])}, ...)",
                           "pass the folder of a downloaded model, e.g. a Hugging Face snapshot", where=str(root))


def file_digests(path: Path, part_size: int = 0) -> tuple[str, str, tuple[str, ...]]:
    """(sha256, xxh3-128, part digests) of a file, in one pass of large chunks (the hashes release the GIL).

    Part digests (xxh3-128 per part_size slice) only with a part_size (0: none).
    """
    digests = Digests(part_size)
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        while n := f.readinto(buf):
            digests.update(view[:n])
    return (*digests.hexdigest(), tuple(digests.part_digests()))


class HashCache:
    """Digests of the files of one folder, reused while (size, mtime_ns, inode) are unchanged.

    An entry is [size, mtime_ns, inode, sha256, xxh3-128, part size, part digests]; the 5-field
    entries written before part digests still serve single-part files and sha256 look-ups.
    """

    def __init__(self, root: Path, part_size_for: Callable[[int], int] | None = None):
        self.root = root.resolve()
        self.part_size_for = part_size_for
        name = hashlib.sha256(str(self.root).encode()).hexdigest()[:24]
        self.path = cache_dir() / f"{name}.json"
        try:
            self.entries: dict[str, list] = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.entries = {}

    @staticmethod
    def _sig(st: os.stat_result) -> list:
        return [st.st_size, st.st_mtime_ns, st.st_ino]

    def get(self, rel: str, st: os.stat_result) -> FileEntry | None:
        """The cached entry when the file is unchanged (entries from before xxh3 count as missing)."""
        e = self.entries.get(rel)
        if not e or len(e) not in (5, 7) or e[:3] != self._sig(st):
            return None
        part_size, parts = (int(e[5]), tuple(e[6])) if len(e) == 7 else (0, ())
        return FileEntry(rel, st.st_size, e[3], e[4], part_size, parts)

    def put(self, rel: str, st: os.stat_result, e: FileEntry) -> None:
        """Remember a file's digests."""
        self.entries[rel] = [*self._sig(st), e.sha256, e.xxh3_128, e.part_size, list(e.parts)]

    def save(self) -> None:
        """Write the cache (best effort: a read-only home only costs re-hashing)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.entries))
            tmp.replace(self.path)
        except OSError:
            pass

    def entry(self, rel: str, st: os.stat_result) -> FileEntry:
        """A FileEntry for one file with part digests at part_size_for(size), hashing it unless cached."""
        size = st.st_size
        want = self.part_size_for(size) if self.part_size_for else 0
        want = want if want < size else 0  # a single-part file: its xxh3-128 is its one part's digest
        e = self.get(rel, st)
        if e is None or e.part_size != want:
            sha, xxh, parts = file_digests(self.root / rel, want)
            e = FileEntry(rel, size, sha, xxh, want, parts)
            self.put(rel, st, e)
        return e


class SharedFd:
    """A file descriptor the parts of one file share: closed once released and no part still uses it.

    A part still running when its file fails must never write into (or read from) the fd number
    after the kernel has handed it to another file.
    """

    def __init__(self, path: Path, flags: int, mode: int = 0o644):
        self.fd = os.open(path, flags, mode)
        self._users = 0
        self._closing = False
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def use(self) -> Iterator[int]:
        """The fd, held open for the block; Cancelled once the file was released."""
        with self._lock:
            if self._closing:
                raise Cancelled()
            self._users += 1
        try:
            yield self.fd
        finally:
            with self._lock:
                self._users -= 1
                last = self._closing and self._users == 0
            if last:
                os.close(self.fd)

    def release(self) -> None:
        """Close now, or as soon as the last part using the fd is done (safe to call twice)."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
            last = self._users == 0
        if last:
            os.close(self.fd)
