"""The record of processing without a deployment: the read-back command run by a real shell against a real
process, the differences `--check` names, the sub-processor allowlist validate enforces (and its printed fix)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

from infra.privacy.record import build_record, differences
from infra.privacy.subprocessors import image_registry, sub_processors
from infra.stack.stackfile import load_stack
from infra.targets.contract import ReplicaFacts
from infra.targets.ssh.record import facts_command, parse_facts
from tests.conftest import ROOT

SECRET = "AKIA-s3cr3t-never-read-back"


def test_the_host_command_reads_switches_and_flag_names_never_secrets_or_values(tmp_path):
    """facts_command in a real shell against a real process: its environment holds a store key and its argv a
    value; only the switch names asked for and option names come back."""
    env = {"PATH": os.environ["PATH"], "DO_NOT_TRACK": "1", "VLLM_NO_USAGE_STATS": "0", "AWS_SECRET_ACCESS_KEY": SECRET}
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "--enable-log-requests",
                             "--api-key=" + SECRET, "--served-model-name", "m"], env=env)
    (tmp_path / "weights").mkdir()
    try:
        caddy = tmp_path / "caddy.json"  # the gateway's config holds keys: only their ids come back
        caddy.write_text(json.dumps({"match": [{"header": {"Authorization": ["Bearer " + SECRET]}}],
                                     "log_append": {"key_id": "sha256:0123456789ab"}}))
        ledger = tmp_path / "keys.json"
        ledger.write_text(json.dumps({"sha256:0123456789ab": "2026-12-01T10:00:00Z", "x; rm -rf /": "now"}))
        cmd = facts_command(f"echo {proc.pid}", ["DO_NOT_TRACK", "VLLM_NO_USAGE_STATS", "HF_HUB_OFFLINE"],
                            str(caddy), [str(tmp_path / "weights"), str(tmp_path / "gone")], str(ledger))
        out = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=30).stdout
    finally:
        proc.kill()
        proc.wait()
    assert SECRET not in out
    f = parse_facts("host h", {"address": "10.0.0.9"}, out)
    assert f.env == {"DO_NOT_TRACK": "1", "VLLM_NO_USAGE_STATS": "0"} and f.error is None
    assert f.flags == ("-c", "--enable-log-requests", "--api-key", "--served-model-name")
    assert f.data == (str(tmp_path / "weights"),) and f.keys == {"sha256:0123456789ab": "2026-12-01T10:00:00Z"}


def test_no_engine_process_is_a_replica_that_cannot_be_checked():
    out = subprocess.run(["sh", "-c", facts_command("true", ["DO_NOT_TRACK"], "", [])], capture_output=True,
                         text=True, timeout=30).stdout
    f = parse_facts("host h", {}, out)
    assert f.error and "no engine process" in f.error


def _record(stack, **facts):
    d = stack.deployment
    from infra.engines.registry import expected_switches

    env = expected_switches(d)
    base = dict(source="host gpu-1", place={"address": "10.0.0.2"}, gpus=("NVIDIA H100 80GB HBM3",), env=env)
    return build_record(stack, [ReplicaFacts(**{**base, **facts})])


def test_check_names_the_host_and_the_flag_that_logs_prompts_and_a_missing_switch():
    s = load_stack("eu-ssh")
    assert differences(s.deployment, _record(s)) == []
    env = {k: v for k, v in _record(s).telemetry_off.items() if k != "VLLM_NO_USAGE_STATS"}
    found = [p.render() for p in differences(s.deployment, _record(s, env=env, flags=("--enable-log-outputs",)))]
    assert len(found) == 2, found
    assert found[0].startswith("host gpu-1: the engine runs without VLLM_NO_USAGE_STATS=1")
    assert found[1].startswith("host gpu-1: the engine runs with --enable-log-outputs") and "log_prompts" in found[1]


def test_a_node_outside_the_eu_is_named_under_residency():
    s = load_stack("eu-ssh")  # policy.residency: eu
    (p,) = differences(s.deployment, _record(s, place={"node": "n1", "region": "us-east-1"}))
    assert p.path == "host gpu-1" and "outside the EU" in p.message and "us-east-1" in p.render()


def test_the_record_names_the_sub_processors_of_the_bundled_ssh_stack():
    names = {p.name: p.role for p in sub_processors(load_stack("eu-ssh").deployment)}
    assert names["example-eu-cloud"] == "compute" and names["s3.es-madrid.example-gpu.eu"] == "weight store"
    assert names["docker.io"] == "run-time download" and "acme-v02.api.letsencrypt.org" in names
    assert (image_registry("nvcr.io/nvidia/tritonserver:1"), image_registry("vllm/vllm-openai:v1"),
            image_registry("localhost:5000/x")) == ("nvcr.io", "docker.io", "localhost:5000")


def _validate(path):
    return subprocess.run([sys.executable, "-m", "cli.main", "validate", str(path)], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)


def test_validate_refuses_a_sub_processor_the_allowlist_lacks_and_its_fix_works(tmp_path):
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.eu-ssh.yaml").read_text())
    allowed = ["example-eu-cloud", "s3.es-madrid.example-gpu.eu", "docker.io", "dl.cloudsmith.io"]
    doc["config"]["inferry:deployment"]["policy"]["sub_processors"] = allowed
    path = tmp_path / "Pulumi.sp.yaml"
    path.write_text(yaml.safe_dump(doc))
    p = _validate(path)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert "target.gateway.acme.directory: reaches acme-v02.api.letsencrypt.org" in p.stderr, p.stderr
    assert "add 'acme-v02.api.letsencrypt.org' to policy.sub_processors" in p.stderr
    doc["config"]["inferry:deployment"]["policy"]["sub_processors"] = allowed + ["acme-v02.api.letsencrypt.org"]
    path.write_text(yaml.safe_dump(doc))  # the printed fix, as printed
    p = _validate(path)
    assert p.returncode == 0, p.stderr


def test_what_destroy_removed_is_what_was_there_before_and_is_gone_after(tmp_path):
    from infra.privacy.removal import keep, removals

    before = [ReplicaFacts("host a", data=("/etc/inferry", "/var/lib/w/m")), ReplicaFacts("host b", data=("/x",)),
              ReplicaFacts("pod p-1", data=("volume weights",)), ReplicaFacts("host c")]
    after = [ReplicaFacts("host a", data=("/var/lib/w/m",), error="no engine process runs"),
             ReplicaFacts("host b", error="not read: host unreachable")]
    found = removals(before, after)
    assert [r.line() for r in found] == [
        "host a: removed /etc/inferry; left /var/lib/w/m",
        "host b: not read after destroy (not read: host unreachable); it held /x",
        "pod p-1: removed volume weights"]
    path = keep("s", found, root=tmp_path)
    assert path.parent == tmp_path / ".inferry" / "records" and json.loads(path.read_text())["machines"][0] == {
        "source": "host a", "removed": ["/etc/inferry"], "left": ["/var/lib/w/m"], "unknown": None}
