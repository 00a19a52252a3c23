"""A store that echoes the signed request in its errors: no key material may reach what inferry prints.

The server answers 403 with the request line and every header (Authorization included) in the
error text; the weights commands and `plan --from-store` must print none of the access key id,
the secret, or the signature the server saw.
"""
from __future__ import annotations

import uuid

import pytest
import yaml

from infra.errors import StorageError
from infra.stack.stackfile import load_stack
from infra.lifecycle.secrets import resolver
from infra.storage.remote import stack_reader
from infra.storage.settings import StoreSettings, scrub
from tests.conftest import ROOT
from tests.support.servers.echo import EchoServer
from tests.support.storage_util import hash_cache_in_tmp, make_model  # noqa: F401 - fixture

ACCESS, SECRET = f"AKIAECHO{uuid.uuid4().hex[:12].upper()}", f"echo-secret-{uuid.uuid4().hex}"


def _leaks(text: str, echo: EchoServer) -> list[str]:
    """The pieces of key material found in text (the signatures are those the server received)."""
    signatures = [a.rsplit("Signature=", 1)[1] for a in echo.authorizations if "Signature=" in a]
    assert signatures, "the server saw no signed request: nothing was tested"
    needles = {"access key id": ACCESS, "secret": SECRET, "Credential=": "Credential=", "Signature=": "Signature="}
    needles |= {f"signature {s[:8]}": s for s in signatures}
    return [name for name, needle in needles.items() if needle.lower() in text.lower()]


@pytest.mark.parametrize("code", ["AccessDenied", "EchoedRequest"])
def test_weights_commands_print_no_key_material(cli, tmp_path, monkeypatch, code):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    make_model(tmp_path / "m", shards=(1 << 20,))
    with EchoServer(code) as echo:
        store = ["--prefix", "m", "--endpoint", echo.endpoint, "--bucket", "echo-bucket"]
        runs = [cli("weights", "ls", *store[2:]), cli("weights", "verify", *store),
                cli("weights", "pull", str(tmp_path / "out"), *store),
                cli("weights", "push", str(tmp_path / "m"), *store)]
    for r in runs:
        assert r.exit_code == 1 and "Traceback" not in r.output, r.output
        assert _leaks(r.output, echo) == [], r.output
    assert "rejected the credentials" in runs[0].output if code == "AccessDenied" else "EchoedRequest" in runs[0].output


def _stack_file(tmp_path, endpoint: str):
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.eu-ssh.yaml").read_text())
    d = doc["config"]["inferry:deployment"]
    d["storage"] = {"endpoint": endpoint, "region": "es-madrid", "bucket": "echo-bucket",
                    "access_key_id": {"env": "T_ECHO_ACCESS"}, "secret_access_key": {"env": "T_ECHO_SECRET"}}
    d["model"]["weights"] = "s3://echo-bucket/llama-3.1-8b-instruct"
    path = tmp_path / "Pulumi.echo-test.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_plan_from_store_reader_maps_errors_like_the_weights_commands(tmp_path, monkeypatch):
    monkeypatch.setenv("T_ECHO_ACCESS", ACCESS)
    monkeypatch.setenv("T_ECHO_SECRET", SECRET)
    with EchoServer("EchoedRequest") as echo:
        stack = load_stack(str(_stack_file(tmp_path, echo.endpoint)))
        read = stack_reader(stack, resolver(stack))
        with pytest.raises(StorageError) as e:
            read("config.json")
    shown = e.value.render()
    assert "config.json" in shown and "EchoedRequest" in shown
    assert _leaks(shown, echo) == [], shown


# cli/plan.py is not this module's to change: until its _store_reader returns infra.storage.remote.stack_reader(s)
# (instead of building its own client and printing the raw error), this documents the leak; then it guards it.
PLAN_USES_IT = "stack_reader" in (ROOT / "cli" / "plan.py").read_text()


@pytest.mark.xfail(not PLAN_USES_IT, strict=True, reason="cli/plan.py does not use infra.storage.remote.stack_reader")
def test_plan_from_store_prints_no_key_material(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("T_ECHO_ACCESS", ACCESS)
    monkeypatch.setenv("T_ECHO_SECRET", SECRET)
    with EchoServer("EchoedRequest") as echo:
        r = cli("plan", str(_stack_file(tmp_path, echo.endpoint)), "--from-store")
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    assert _leaks(r.output, echo) == [], r.output


def test_scrub_removes_what_a_store_may_echo():
    s = StoreSettings("http://x", "r", "bkt", ACCESS, SECRET)
    sig = "ab12" * 16
    text = (f"denied: Authorization: AWS4-HMAC-SHA256 Credential={ACCESS}/20260101/r/s3/aws4_request, "
            f"SignedHeaders=host;x-amz-date, Signature={sig} key={SECRET} x-amz-content-sha256: {'e3' * 32}")
    clean = scrub(text, s)
    assert ACCESS not in clean and SECRET not in clean and sig not in clean and "e3e3" * 8 not in clean
    assert clean.startswith("denied: ")
    assert scrub("x" * 1000, s, limit=50) == "x" * 50 + "…"
