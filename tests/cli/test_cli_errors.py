"""Bad input on every command: a clear error naming the field or host and the fix, exit 1, no traceback."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from infra.lifecycle.deployer import OutputValue
from tests.conftest import ROOT
from tests.support.progharness import write_stack

CLOSED = "http://127.0.0.1:1"  # nothing listens on port 1: connections are refused
ENV = {"CE_S3_ACCESS": "a", "CE_S3_SECRET": "b", "CE_API_KEY": "k", "AWS_ACCESS_KEY_ID": "a",
       "AWS_SECRET_ACCESS_KEY": "b"}
SSH = {"kind": "ssh", "private_key": {"env": "CE_API_KEY"}, "hosts": [{"address": "10.0.0.2"}]}

# (args with {tmp}/{stack}/{s3} placeholders, expected exit code, substrings every one of which must appear)
CASES = [
    (["validate", ""], 1, ["invalid stack name", "fix:"]),
    (["validate", "bad name"], 1, ["invalid stack name 'bad name'", "letters, digits"]),
    (["validate", "{tmp}"], 1, ["is a folder, not a stack file"]),
    (["validate", "{tmp}/Pulumi.badurl.yaml"], 1, ["storage.endpoint", "expected http(s)://HOST[:PORT]"]),
    (["validate", "{tmp}/Pulumi.badbucket.yaml"], 1, ["storage.bucket", "S3 bucket name", "'Bad_B'"]),
    (["validate", "{tmp}/afile"], 1, ["expected a mapping with a 'config' key", "inferry init"]),
    (["init", "{tmp}/Pulumi.bad name.yaml"], 1, ["invalid stack name 'bad name'"]),
    (["init", "{tmp}/afile/Pulumi.x.yaml"], 1, ["cannot write", "afile", "fix:"]),
    (["render", "{stack}", "--out", "{tmp}/afile"], 1, ["--out", "cannot write", "fix:"]),
    (["render", "{stack}", "--out", "{tmp}/afile/sub"], 1, ["--out", "Not a directory"]),
    (["plan", "{tmp}/Pulumi.badurl.yaml", "--json"], 1, ["storage.endpoint"]),
    (["plan", "{tmp}/Pulumi.nomodel.yaml", "--suggest"], 1, ["model.name", "llama-3.1-8b"]),
    (["plan", "{stack}", "--from-store"], 1, ["could not read", "127.0.0.1:1", "fix:"]),
    (["weights", "push", "{tmp}/none", "--stack", "{stack}"], 1, ["is not a folder"]),
    (["weights", "push", "{tmp}/empty", "--stack", "{stack}"], 1, ["holds no weight files"]),
    (["weights", "push", "{tmp}/model", "--stack", "{stack}"], 1, ["127.0.0.1:1 is not reachable"]),
    (["weights", "ls", "--endpoint", "not a url", "--bucket", "b"], 1, ["--endpoint", "http(s)://HOST"]),
    (["weights", "ls", "--endpoint", "http://127.0.0.1:1", "--bucket", "Bad_B"], 1,
     ["--bucket", "not a valid S3 bucket name"]),
    (["weights", "ls", "--endpoint", "http://[::1", "--bucket", "b"], 1, ["--endpoint", "Invalid IPv6"]),
    (["weights", "ls", "--endpoint", "http://127.0.0.1:99999", "--bucket", "b"], 1, ["Port out of range"]),
    (["weights", "copy", "-p", "m", "--endpoint", CLOSED, "--bucket", "src-bucket", "--to-endpoint", "ftp://x",
      "--to-bucket", "dst-bucket"], 1, ["--to-endpoint", "http(s)://HOST"]),
    (["weights", "verify", "--endpoint", "{s3}", "--bucket", "cli-errors", "-p", "nothing"], 1,
     ["no inferry-manifest.json", "weights push FOLDER --prefix nothing"]),
    (["weights", "pull", "{tmp}/afile", "--endpoint", "{s3}", "--bucket", "cli-errors", "-p", "m"], 1,
     ["cannot create folder", "afile", "fix:"]),
    (["weights", "push", "{tmp}/broken", "--endpoint", "{s3}", "--bucket", "cli-errors", "-p", "b"], 1,
     ["broken.safetensors is a broken link", "download the model again"]),
    (["weights", "pull", "{tmp}/blocked", "--endpoint", "{s3}", "--bucket", "cli-errors", "-p", "m"], 1,
     ["Is a directory", "blocked/model.safetensors", "remove or fix what is in the way"]),
    (["bench", "{stack}", "--requests", "2", "--report", "{tmp}/afile/r.json"], 1, ["--report", "cannot write"]),
    (["bench", "{stack}", "--requests", "2", "--report", "{tmp}"], 1, ["--report", "Is a directory"]),
    (["bench", "{stack}", "--requests", "2", "--report", "{tmp}/r.json"], 1, ["none of 2 request(s) completed"]),
    (["status", "{stack}"], 1, ["NOT HEALTHY"]),
]


@pytest.fixture
def world(tmp_path, monkeypatch, s3_server, cli):
    """A tmp folder with a file, an empty folder, a model, broken stacks; a stack whose store and endpoint refuse."""
    for k, v in {**ENV, "INFERRY_STATE_DIR": str(tmp_path / "state"), "XDG_CACHE_HOME": str(tmp_path)}.items():
        monkeypatch.setenv(k, v)
    (tmp_path / "afile").write_text("x")
    (tmp_path / "empty").mkdir()
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model.safetensors").write_bytes(os.urandom(1024))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "broken.safetensors").symlink_to(tmp_path / "gone")
    (tmp_path / "blocked" / "model.safetensors").mkdir(parents=True)
    stack = write_stack(tmp_path, "ce", target=SSH, storage_endpoint=CLOSED, env_prefix="CE")
    text = stack.read_text()
    (tmp_path / "Pulumi.badurl.yaml").write_text(text.replace(CLOSED, "http://[::1"))
    (tmp_path / "Pulumi.badbucket.yaml").write_text(text.replace("bucket: inferry-weights", "bucket: Bad_B"))
    (tmp_path / "Pulumi.nomodel.yaml").write_text(text.replace("name: llama-3.1-8b-instruct", "name: foo-model"))
    s3_server.bucket("cli-errors")
    keys = {"AWS_ACCESS_KEY_ID": s3_server.access_key, "AWS_SECRET_ACCESS_KEY": s3_server.secret_key}
    store = ["--endpoint", s3_server.endpoint, "--bucket", "cli-errors", "-p", "m"]
    assert cli("weights", "push", str(tmp_path / "model"), *store, env=keys).exit_code == 0
    monkeypatch.setattr("cli.lifecycle.make_deployer", lambda: _Refusing())
    return {"tmp": str(tmp_path), "stack": str(stack), "s3": s3_server.endpoint, "keys": keys}


class _Refusing:
    """A deployed stack whose endpoint refuses connections (no Pulumi CLI needed: `up` is covered elsewhere)."""

    def check(self, stack):
        """Runnable: what these tests reach lies past the Pulumi check."""

    def outputs(self, stack):
        return {"endpoint": OutputValue(CLOSED)}


@pytest.mark.parametrize("args,code,expected", CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_bad_input_is_a_clean_error(cli, world, args, code, expected):
    argv = [a.format(**world) for a in args]
    env = world["keys"] if "{s3}" in " ".join(args) else None
    r = cli(*argv, env=env)
    assert r.exit_code == code, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.output
    for text in expected:
        assert text in r.output, (text, r.output)


def test_failed_init_and_render_leave_nothing_behind(cli, tmp_path):
    (tmp_path / "afile").write_text("x")
    assert cli("init", str(tmp_path / "afile" / "Pulumi.x.yaml")).exit_code == 1
    assert cli("render", "eu-ssh", "--out", str(tmp_path / "afile" / "out")).exit_code == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"] and (tmp_path / "afile").read_text() == "x"


@pytest.mark.parametrize("args,expected", [
    (["init", "{tmp}/afile/Pulumi.x.yaml"], "cannot write"),
    (["render", "eu-ssh", "--out", "{tmp}/afile"], "--out: cannot write"),
    (["validate", "bad name"], "invalid stack name"),
])
def test_user_sees_one_clean_message_on_stderr(tmp_path, args, expected):
    (tmp_path / "afile").write_text("x")
    argv = [a.format(tmp=tmp_path) for a in args]
    p = subprocess.run([sys.executable, "-m", "cli.main", *argv], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr.startswith("error: ") and expected in p.stderr and "fix:" in p.stderr


def test_unreadable_stack_file_and_malformed_endpoint_url(cli, tmp_path, monkeypatch):
    from pathlib import Path

    from infra.lifecycle.probe import get

    assert get("not a url") == (0, "") and get("http://[::1/health") == (0, "")  # nothing answered, no raise
    path = tmp_path / "Pulumi.locked.yaml"
    path.write_text("config: {}")

    def denied(self, *a, **kw):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", denied)  # root reads any file: simulate a mode-000 one
    r = cli("validate", str(path))
    assert r.exit_code == 1 and "cannot read the stack file: Permission denied" in r.output, r.output


def test_unwritable_state_dir_stops_migrate_before_any_step(cli, world, monkeypatch, tmp_path):
    monkeypatch.setenv("INFERRY_STATE_DIR", str(tmp_path / "afile"))
    other = tmp_path / "Pulumi.ce2.yaml"
    other.write_text((tmp_path / "Pulumi.ce.yaml").read_text().replace("region: test", "region: test2"))
    r = cli("migrate", "--from", world["stack"], "--to", str(other), "--yes")
    assert r.exit_code == 1 and isinstance(r.exception, SystemExit), r.output
    assert "inferry state: cannot write" in r.output and "INFERRY_STATE_DIR" in r.output and "[1/" not in r.output


@pytest.mark.parametrize("args", [["destroy", "eu-ssh"], ["migrate", "--from", "aws-k8s", "--to", "eu-ssh"]])
def test_destructive_commands_without_a_terminal_ask_for_yes(cli, args, monkeypatch):
    import infra.lifecycle.migrate as migrate_mod

    monkeypatch.setattr(migrate_mod.Migration, "plan", lambda self, allow: _NoPlan(), raising=True)
    monkeypatch.setattr("cli.lifecycle.make_deployer", lambda: _Refusing())  # Pulumi is checked before asking
    result = cli(*args)
    assert result.exit_code == 1
    assert "pass --yes" in result.output and "Traceback" not in result.output


class _NoPlan:
    diffs: list = []
    estimate = None
    resume_from: list = []
