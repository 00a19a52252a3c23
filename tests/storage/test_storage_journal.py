"""The push's local journal of completed files: each completion and each forget on disk at once (an append-only
log), read back by the next process, folded into the record by flush, and a line cut short by a kill skipped."""
from __future__ import annotations

import json

import pytest

from infra.storage.journal import Journal
from infra.storage.manifest import FileEntry
from infra.storage.settings import StoreSettings

SETTINGS = StoreSettings("http://127.0.0.1:9", "us-east-1", "bucket", "key", "secret")


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def entry(path: str, sha: str = "a" * 64) -> FileEntry:
    return FileEntry(path, 10, sha)


def test_a_completed_file_is_known_to_the_next_process_without_a_flush():
    Journal(SETTINGS, "m").record(entry("one.safetensors"))  # then the process is killed: no flush
    again = Journal(SETTINGS, "m")
    assert again.has(entry("one.safetensors")) and not again.has(entry("one.safetensors", "b" * 64))
    assert not Journal(SETTINGS, "other").has(entry("one.safetensors"))


def test_a_forgotten_file_stays_forgotten_when_the_push_replacing_it_is_killed():
    first = Journal(SETTINGS, "m")
    first.record(entry("one.safetensors"))
    first.flush()
    Journal(SETTINGS, "m").forget(["one.safetensors"])  # --repair began re-sending it, then a kill
    assert not Journal(SETTINGS, "m").has(entry("one.safetensors"))


def test_flush_folds_the_log_into_the_record(cache):
    j = Journal(SETTINGS, "m")
    for i in range(3):
        j.record(entry(f"f{i}"))
    j.forget(["f1"])
    folder = cache / "inferry" / "journal"
    assert [p.suffix for p in folder.iterdir()] == [".log"]
    j.flush()
    (record,) = folder.iterdir()
    assert json.loads(record.read_text()) == {"f0": [10, "a" * 64], "f2": [10, "a" * 64]}
    assert {p for p in ("f0", "f1", "f2") if Journal(SETTINGS, "m").has(entry(p))} == {"f0", "f2"}


def test_a_line_cut_short_by_a_kill_is_skipped(cache):
    j = Journal(SETTINGS, "m")
    j.record(entry("whole"))
    (log,) = (cache / "inferry" / "journal").glob("*.log")
    with open(log, "a") as f:
        f.write('\n["cut", 10, "aaa')  # our own line, cut short
    again = Journal(SETTINGS, "m")
    assert again.has(entry("whole")) and "cut" not in again.done
    again.record(entry("after"))  # appended after the torn line: a line of its own
    assert Journal(SETTINGS, "m").has(entry("after"))
