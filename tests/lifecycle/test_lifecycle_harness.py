"""The whole-program harness keeps state like the engine: create once, then update only what diff reports."""
from __future__ import annotations

from pathlib import Path

import pulumi
import pytest
import yaml
from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider, UpdateResult

from infra.errors import InferryError
from infra.stack.stackfile import load_stack
from tests.conftest import ROOT
from tests.support.progharness import ProgramHarness


class FileProvider(ResourceProvider):
    """A real provider of files: writes count how often the provider touched each one."""

    def create(self, props):
        Path(props["path"]).write_text(props["content"])
        return CreateResult(props["path"], {"path": props["path"], "content": props["content"], "writes": 1})

    def diff(self, _id, olds, news):
        changed = [k for k in ("path", "content") if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(changed), replaces=[k for k in changed if k == "path"])

    def update(self, _id, olds, news):
        Path(news["path"]).write_text(news["content"])
        return UpdateResult({"path": news["path"], "content": news["content"], "writes": olds["writes"] + 1})

    def delete(self, _id, props):
        Path(props["path"]).unlink()


class File(pulumi.dynamic.Resource):
    """A file on this machine."""

    writes: pulumi.Output[int]

    def __init__(self, name: str, path: str, content: str):
        super().__init__(FileProvider(), name, {"path": path, "content": content, "writes": None})


def files_program():
    cfg = pulumi.Config("t")
    made = [File(n, str(Path(cfg.require("dir")) / n), cfg.require(n)) for n in cfg.require_object("names")]
    pulumi.export("writes", pulumi.Output.all(*[f.writes for f in made]))


def write_stack(tmp_path: Path, **files: str):
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.eu-ssh.yaml").read_text())
    doc["config"].update({"t:dir": str(tmp_path), "t:names": list(files), **{f"t:{k}": v for k, v in files.items()}})
    path = tmp_path / "Pulumi.files.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_stack(str(path))


@pytest.fixture
def harness(tmp_path):
    return ProgramHarness(tmp_path / "state", program=files_program)


def test_first_run_creates_second_changes_nothing(tmp_path, harness):
    stack = write_stack(tmp_path, a="one", b="two")
    out = harness.up(stack, print)
    assert out["writes"].value == [1, 1] and (tmp_path / "a").read_text() == "one"
    assert harness.last.ops == {"create": 2}
    mtime = (tmp_path / "a").stat().st_mtime_ns
    out = harness.up(stack, print)
    assert harness.last.ops == {"same": 2} and out["writes"].value == [1, 1]
    assert (tmp_path / "a").stat().st_mtime_ns == mtime


def test_update_only_where_diff_says(tmp_path, harness):
    harness.up(write_stack(tmp_path, a="one", b="two"), print)
    stack = write_stack(tmp_path, a="one", b="TWO")
    assert harness.preview(stack, print).counts == {"same": 1, "update": 1}
    assert (tmp_path / "b").read_text() == "two"  # a preview changes nothing
    out = harness.up(stack, print)
    assert harness.last.ops == {"same": 1, "update": 1} and out["writes"].value == [1, 2]
    assert (tmp_path / "b").read_text() == "TWO"


def test_removed_resource_is_deleted_and_destroy_deletes_all(tmp_path, harness):
    harness.up(write_stack(tmp_path, a="one", b="two"), print)
    stack = write_stack(tmp_path, a="one")
    harness.up(stack, print)
    assert not (tmp_path / "b").exists() and (tmp_path / "a").exists()
    assert harness.destroy(stack, print).counts == {"delete": 1}
    assert not (tmp_path / "a").exists() and harness.outputs(stack) == {}


def test_provider_failure_keeps_what_was_done(tmp_path, harness):
    stack = write_stack(tmp_path, a="one")
    harness.up(stack, print)
    (tmp_path / "sub").write_text("a file where a folder is needed")
    bad = write_stack(tmp_path, a="one", **{"sub/c": "x"})
    with pytest.raises(InferryError, match="up failed"):
        harness.up(bad, print)
    assert [k.rpartition("::")[2] for k in harness.state(stack)["resources"]] == ["a"]
