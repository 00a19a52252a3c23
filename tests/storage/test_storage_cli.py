"""`inferry weights ...` end to end against the real S3 server: explicit endpoint and --stack."""
from __future__ import annotations

import yaml

from tests.conftest import ROOT
from tests.support.storage_util import hash_cache_in_tmp, make_model  # noqa: F401 - fixture


def _stack_file(tmp_path, server, bucket):
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.eu-ssh.yaml").read_text())
    d = doc["config"]["inferry:deployment"]
    d["storage"] = {"endpoint": server.endpoint, "region": "es-madrid", "bucket": bucket,
                    "access_key_id": {"env": "T_S3_ACCESS"}, "secret_access_key": {"env": "T_S3_SECRET"}}
    d["model"]["weights"] = f"s3://{bucket}/llama-3.1-8b-instruct"
    path = tmp_path / "Pulumi.cli-test.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_push_ls_verify_pull_with_a_stack(cli, s3_server, tmp_path, monkeypatch):
    s3_server.bucket("cli-stack")
    monkeypatch.setenv("T_S3_ACCESS", s3_server.access_key)
    monkeypatch.setenv("T_S3_SECRET", s3_server.secret_key)
    stack = str(_stack_file(tmp_path, s3_server, "cli-stack"))
    make_model(tmp_path / "m", shards=(3 << 20,))
    r = cli("weights", "push", str(tmp_path / "m"), "--stack", stack)
    assert r.exit_code == 0, r.output
    assert "4 file(s) transferred" in r.output
    r = cli("weights", "ls", "--stack", stack)
    assert "llama-3.1-8b-instruct  4 file(s)" in r.output and "complete" in r.output
    r = cli("weights", "verify", "--stack", stack)
    assert r.exit_code == 0 and "\nOK 4 file(s)" in r.output
    assert "verify llama-3.1-8b-instruct: 3.1/3.1 MB (100%)" in r.output  # plain progress off a terminal
    r = cli("weights", "pull", str(tmp_path / "out"), "--stack", stack)
    assert r.exit_code == 0 and (tmp_path / "out" / "config.json").is_file()
    assert s3_server.secret_key not in r.output


def test_explicit_endpoint_copy_and_corruption_exit_1(cli, s3_server, s3_server_factory, tmp_path, monkeypatch):
    other = s3_server_factory(access_key="cli-dest-access", secret_key="cli-dest-secret")
    s3_server.bucket("cli-src")
    other.bucket("cli-dst")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_key)
    monkeypatch.setenv("DEST_AWS_ACCESS_KEY_ID", other.access_key)
    monkeypatch.setenv("DEST_AWS_SECRET_ACCESS_KEY", other.secret_key)
    src = ["--endpoint", s3_server.endpoint, "--bucket", "cli-src"]
    make_model(tmp_path / "m", shards=(3 << 20,))
    assert cli("weights", "push", str(tmp_path / "m"), "-p", "m", *src).exit_code == 0
    r = cli("weights", "copy", "-p", "m", *src, "--to-endpoint", other.endpoint, "--to-bucket", "cli-dst")
    assert r.exit_code == 0, r.output
    stored = other.root / "cli-dst" / "m" / "model-00001-of-00001.safetensors"
    stored.write_bytes(b"x" + stored.read_bytes()[1:])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", other.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", other.secret_key)
    r = cli("weights", "verify", "-p", "m", "--endpoint", other.endpoint, "--bucket", "cli-dst")
    assert r.exit_code == 1
    assert "model-00001-of-00001.safetensors: sha256" in r.output and "Traceback" not in r.output


def test_missing_keys_and_missing_store_are_clean_errors(cli, monkeypatch, tmp_path):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    r = cli("weights", "ls", "--endpoint", "http://127.0.0.1:9", "--bucket", "abc")
    assert r.exit_code == 1 and "AWS_ACCESS_KEY_ID" in r.output and "Traceback" not in r.output
    r = cli("weights", "ls")
    assert r.exit_code == 1 and "--stack" in r.output


def test_push_to_a_missing_bucket_names_the_flag_and_create_bucket_creates_it(cli, s3_server, tmp_path,
                                                                                monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_key)
    store = ["--endpoint", s3_server.endpoint, "--bucket", "not-there-yet"]
    make_model(tmp_path / "Llama-Small", shards=(1 << 20,))
    r = cli("weights", "push", str(tmp_path / "Llama-Small"), *store)
    assert r.exit_code == 1 and "bucket not-there-yet does not exist" in r.output
    assert "--create-bucket" in r.output and "--bucket" in r.output and "storage.bucket" not in r.output
    r = cli("weights", "push", str(tmp_path / "Llama-Small"), *store, "--create-bucket")
    assert r.exit_code == 0, r.output
    assert f"created bucket not-there-yet at {s3_server.endpoint}" in r.output
    # no --prefix: the folder's name
    assert (s3_server.root / "not-there-yet" / "Llama-Small" / "inferry-manifest.json").is_file()
    r = cli("weights", "push", str(tmp_path / "Llama-Small"), *store, "--create-bucket")
    assert r.exit_code == 0 and "created bucket" not in r.output  # exists now: nothing created


def test_pull_from_a_missing_stack_bucket_names_the_stack_field(cli, s3_server, tmp_path, monkeypatch):
    monkeypatch.setenv("T_S3_ACCESS", s3_server.access_key)
    monkeypatch.setenv("T_S3_SECRET", s3_server.secret_key)
    stack = str(_stack_file(tmp_path, s3_server, "no-such-stack-bucket"))
    r = cli("weights", "pull", str(tmp_path / "out"), "--stack", stack)
    assert r.exit_code == 1 and "storage.bucket in" in r.output and "--create-bucket" in r.output


def test_ls_takes_prefix_and_json(cli, s3_server, tmp_path, monkeypatch):
    import json

    s3_server.bucket("cli-ls")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_key)
    store = ["--endpoint", s3_server.endpoint, "--bucket", "cli-ls"]
    make_model(tmp_path / "m", shards=(1 << 20,))
    for prefix in ("team-a/m1", "team-b/m2"):
        assert cli("weights", "push", str(tmp_path / "m"), "-p", prefix, *store).exit_code == 0
    r = cli("weights", "ls", *store, "--prefix", "team-a", "--json")
    assert r.exit_code == 0, r.output
    [model] = json.loads(r.output)
    assert model["prefix"] == "team-a/m1" and model["complete"] is True and model["files"] == 4
    r = cli("weights", "ls", *store, "-p", "team-b")
    assert r.exit_code == 0 and "m2  4 file(s)" in r.output and "m1" not in r.output


def test_help_names_every_env_variable_in_full(cli):
    import re

    for sub in ("push", "pull", "copy", "verify", "ls"):
        r = cli("weights", sub, "--help", env={"COLUMNS": "80"})  # a common terminal: nothing is cut off
        assert r.exit_code == 0 and "…" not in r.output, r.output
        text = " ".join(r.output.split())
        assert "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in text and "/..." not in text, sub
    r = cli("weights", "copy", "--help", env={"COLUMNS": "200"})
    text = " ".join(r.output.split())
    assert "DEST_AWS_ACCESS_KEY_ID and DEST_AWS_SECRET_ACCESS_KEY" in text
    for flag in ("--to-region", "--to-bucket", "--to-prefix", "--to-stack", "--to-endpoint", "--create-bucket"):
        help_text = text.split(flag + " ", 1)[1].split("│", 1)[0]
        assert len(re.sub(r"<[^>]*>|\[default: [^]]*\]", "", help_text).strip()) > 10, (flag, help_text)


def test_store_errors_name_the_options_that_chose_the_store(cli, s3_server, tmp_path, monkeypatch):
    s3_server.bucket("cli-origin")
    make_model(tmp_path / "m", shards=(1 << 20,))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    r = cli("weights", "push", str(tmp_path / "m"), "--endpoint", s3_server.endpoint, "--bucket", "cli-origin")
    assert r.exit_code == 1 and "rejected the credentials" in r.output
    assert "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY" in r.output and "storage." not in r.output
    r = cli("weights", "ls", "--endpoint", "http://127.0.0.1:9", "--bucket", "cli-origin")
    assert r.exit_code == 1 and "check --endpoint" in r.output and "storage." not in r.output
    monkeypatch.setenv("DEST_AWS_ACCESS_KEY_ID", s3_server.access_key)
    monkeypatch.setenv("DEST_AWS_SECRET_ACCESS_KEY", "not-the-secret-either")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_key)
    assert cli("weights", "push", str(tmp_path / "m"), "--endpoint", s3_server.endpoint,
               "--bucket", "cli-origin").exit_code == 0
    r = cli("weights", "copy", "-p", "m", "--endpoint", s3_server.endpoint, "--bucket", "cli-origin",
            "--to-endpoint", s3_server.endpoint, "--to-bucket", "cli-origin", "--to-prefix", "m2")
    assert r.exit_code == 1 and "check DEST_AWS_ACCESS_KEY_ID / DEST_AWS_SECRET_ACCESS_KEY" in r.output, r.output
