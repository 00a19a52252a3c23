"""Pure parts of the weight store: manifest, part sizes, progress lines, settings."""
from __future__ import annotations

import hashlib
import io

import pytest

from infra.errors import StorageError
from infra.storage.engine import ranges
from infra.storage.manifest import FileEntry, Manifest
from infra.storage.progress import Meter
from infra.storage.settings import MiB, StoreSettings


def test_manifest_round_trip_and_rejects_garbage():
    m = Manifest((FileEntry("b.safetensors", 10, "ab" * 32), FileEntry("a.json", 2, "cd" * 32)), "file:///m")
    again = Manifest.from_json(m.to_json())
    assert again.by_path() == m.by_path() and again.total == 12 and again.created == m.created
    assert [f.path for f in again.files] == ["a.json", "b.safetensors"]
    with pytest.raises(StorageError, match="not a valid manifest"):
        Manifest.from_json("{]")
    with pytest.raises(StorageError, match="total does not match"):
        Manifest.from_json(m.to_json().replace('"total": 12', '"total": 13'))


def test_part_size_grows_to_stay_under_ten_thousand_parts():
    s = StoreSettings("http://x", "r", "bkt", "a", "s", part_size=8 * MiB)
    assert s.part_size_for(1 << 30) == 8 * MiB
    big = 800 << 30
    assert -(-big // s.part_size_for(big)) <= 10_000
    assert ranges(0, 5) == [(0, 0, 0)] and ranges(11, 5) == [(0, 0, 5), (1, 5, 5), (2, 10, 1)]


def test_settings_never_show_keys():
    s = StoreSettings("http://x", "r", "bkt", "AKIDEXAMPLE", "very-secret")
    assert "very-secret" not in repr(s) and "AKIDEXAMPLE" not in repr(s)


def test_progress_prints_plain_lines_off_a_terminal():
    stream = io.StringIO()
    meter = Meter("push m", 4 * MiB, stream=stream, every_s=0)
    meter(2 * MiB)
    meter(2 * MiB)
    meter.close()
    lines = stream.getvalue().splitlines()
    assert lines and "push m: 4.2/4.2 MB (100%)" in lines[-1] and "MB/s" in lines[-1]
    quiet = io.StringIO()
    Meter("x", 10, show=False, stream=quiet, every_s=0)(10)
    assert quiet.getvalue() == ""


def test_resumed_parts_are_kept_only_with_the_right_size_and_an_etag_that_checks(tmp_path):
    from infra.storage.upload import _verified

    part = 5 * MiB
    data = bytes(range(256)) * (2 * part // 256) + b"tail"
    local = tmp_path / "f"
    local.write_bytes(data)
    md5 = '"%s"' % hashlib.md5(data[part:2 * part]).hexdigest()
    listed = {1: ('"journaled"', part), 2: (md5, part), 3: ('"other"', 5), 4: ('"x"', part)}
    # 1: the ETag acknowledged before (journaled) - kept without reading the file; 2: not journaled, but
    # its ETag is the MD5 of the local bytes; 3: right ETag, wrong size; 4: a part number the file has not.
    kept = _verified(listed, {1: '"journaled"', 3: '"other"'}, local, len(data), part)
    assert kept == {1: '"journaled"', 2: md5}
    assert _verified({2: ('"' + "0" * 32 + '"', part)}, {}, local, len(data), part) == {}


def test_part_log_is_for_one_object_only(tmp_path):
    from infra.storage.download import PartLog

    entry = FileEntry("a.safetensors", 10 * MiB, "ab" * 32, "cd" * 16)
    log = PartLog(tmp_path / "a.inferry-parts", entry, 5 * MiB, entry.xxh3_128)
    log.start()
    log.add(1, "0123456789abcdef")
    with open(log.path, "a") as f:
        f.write("0 01234")  # a line cut short by a kill
    assert log.load() == {1: "0123456789abcdef"}
    other = FileEntry("a.safetensors", 10 * MiB, "ef" * 32, "01" * 16)  # the model was pushed again meanwhile
    assert PartLog(log.path, other, 5 * MiB, other.xxh3_128).load() == {}
    assert PartLog(log.path, entry, 8 * MiB, entry.xxh3_128).load() == {}  # another part size
