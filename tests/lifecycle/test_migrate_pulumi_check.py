"""Lifecycle commands find out that the Pulumi CLI is missing before they print progress, ask, or copy weights."""
from __future__ import annotations

from tests.support.progharness import write_stack
from tests.support.storage_util import hash_cache_in_tmp, make_model  # noqa: F401 - fixture
from tests.lifecycle.test_migrate_weights import PREFIX, SSH, server_pair

NO_PULUMI = "/usr/bin:/bin"  # the real environment: no pulumi anywhere on it
INSTALL = "https://www.pulumi.com/docs/install/"


def test_preview_up_refresh_say_so_before_any_progress(cli, monkeypatch):
    monkeypatch.setenv("PATH", NO_PULUMI)
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "x")
    for command, progress in (("preview", "previewing"), ("up", "updating"), ("refresh", "refreshing")):
        r = cli(command, "eu-ssh")
        assert r.exit_code == 1 and INSTALL in r.output, r.output
        assert progress not in r.output, (command, r.output)


def test_destroy_says_so_before_asking(cli, monkeypatch):
    monkeypatch.setenv("PATH", NO_PULUMI)
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "x")
    r = cli("destroy", "eu-ssh")  # no terminal: asking would fail with "needs a yes" first
    assert r.exit_code == 1 and INSTALL in r.output and "needs a yes" not in r.output, r.output


def test_migrate_copies_nothing_without_a_usable_pulumi(cli, tmp_path, s3_server_factory, monkeypatch):
    a, b = server_pair(s3_server_factory, monkeypatch, ("PA", "PB"))
    a.bucket("weights-a")
    sa = write_stack(tmp_path, "pa", target=SSH, storage_endpoint=a.endpoint, env_prefix="PA", bucket="weights-a")
    sb = write_stack(tmp_path, "pb", target=SSH, storage_endpoint=b.endpoint, env_prefix="PB", bucket="weights-b")
    make_model(tmp_path / "m", shards=(1 << 20,))
    assert cli("weights", "push", str(tmp_path / "m"), "--stack", str(sa)).exit_code == 0
    monkeypatch.setenv("PATH", NO_PULUMI)
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "x")
    monkeypatch.setenv("INFERRY_STATE_DIR", str(tmp_path / "state"))
    r = cli("migrate", "--from", str(sa), "--to", str(sb), "--yes")
    assert r.exit_code == 1 and INSTALL in r.output, r.output
    assert "copy" not in r.output and not (b.root / "weights-b").exists()  # nothing copied, no bucket made
    assert (a.root / "weights-a" / PREFIX / "inferry-manifest.json").is_file()


def test_a_pulumi_cli_too_old_to_drive_is_refused_before_any_progress(cli, monkeypatch, tmp_path):
    """inferry reads outputs from the engine's event stream over gRPC (CLI 3.206 and later): an older CLI is
    named, with the install hint, before anything runs."""
    fake = tmp_path / "bin" / "pulumi"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n[ \"$1\" = version ] && echo v3.100.0 && exit 0\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{NO_PULUMI}")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "x")
    r = cli("up", "eu-ssh")
    assert r.exit_code == 1 and "v3.100.0" in r.output and "v3.206.0 or newer" in r.output, r.output
    assert INSTALL in r.output and "updating" not in r.output and "Traceback" not in r.output, r.output
