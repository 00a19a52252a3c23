"""Faults on real test hosts: sshd killed mid-apply, changed host keys, an engine that never gets healthy, preflight."""
from __future__ import annotations

import hashlib
import time

import pytest

from infra.errors import RemoteError
from infra.targets.ssh import pool
from infra.targets.ssh.session import Session
from tests.support.ssh_env import FILES, apply, deployment, ops_log, secrets, fresh_sessions, weights_store  # noqa: F401


def test_sshd_killed_mid_apply_is_named_and_the_next_apply_converges(make_hosts, weights_store, monkeypatch):
    good, bad = make_hosts(2)
    d = deployment([good, bad], weights_store)
    real_run = Session.run

    def run(self, cmd, step, **kw):
        if step == "health check" and self.conn.address == bad.address:
            bad.kill_sshd()  # connections drop while the command runs
        return real_run(self, cmd, step, **kw)

    monkeypatch.setattr(Session, "run", run)
    with pytest.raises(RemoteError) as e:
        apply(d, [good, bad], weights_store)
    text = e.value.render()
    assert f"host {bad.name}: health check failed" in text and "sshd is running" in text
    assert f"converged: {good.name} (http://{good.address}:8000/v1)" in text
    monkeypatch.setattr(Session, "run", real_run)
    bad.start_sshd()
    again = apply(d, [good, bad], weights_store)
    assert again.endpoints == [f"http://{h.address}:8000/v1" for h in (good, bad)]
    assert again.hosts[0].outputs["service"]["restarts"] == 0  # the converged host is not touched again


def test_changed_pinned_host_key_is_refused(make_hosts, weights_store):
    (h,) = make_hosts(1)
    d = deployment([h], weights_store)
    h.regenerate_host_key()
    with pytest.raises(RemoteError) as e:
        apply(d, [h], weights_store)
    text = e.value.render()
    assert "host key changed" in text and "refusing to connect" in text and "host_key in the stack file" in text
    assert ops_log(h) == []


def test_trust_on_first_use_records_then_refuses_a_changed_key(make_hosts, weights_store, tmp_path):
    (h,) = make_hosts(1)
    known = tmp_path / "known_hosts"
    unpinned = lambda **kw: deployment([h], weights_store, known_hosts=str(known), **kw)  # noqa: E731
    d = unpinned(trust_on_first_use=True)
    d = d.model_copy(update={"target": d.target.model_copy(update={"hosts": [
        hh.model_copy(update={"host_key": None}) for hh in d.target.hosts]})})
    with pytest.raises(RemoteError, match="unknown host key .* is not in .*trust_on_first_use"):
        apply(d.model_copy(update={"target": d.target.model_copy(update={"trust_on_first_use": False})}), [h],
              weights_store)
    apply(d, [h], weights_store)
    assert known.read_text() == f"{h.address} {h.host_key_line}\n"
    h.regenerate_host_key()
    pool.close_all()
    with pytest.raises(RemoteError) as e:
        apply(d, [h], weights_store)
    assert f"ssh-keygen -R '{h.address}' -f {known}" in e.value.render()


def test_engine_never_healthy_shows_its_log(make_hosts, weights_store):
    (h,) = make_hosts(1)
    h.install("vllm", "echo 'loading model weights'; echo 'ValueError: unsupported rope_scaling type: bogus' >&2; exit 1")
    d = deployment([h], weights_store, health_timeout_s=5)
    with pytest.raises(RemoteError) as e:
        apply(d, [h], weights_store)
    text = e.value.render()
    assert f"host {h.name}: the engine did not become healthy within 5s" in text
    assert "ValueError: unsupported rope_scaling type: bogus" in text and "engine exited with status 1" in text


def test_too_little_disk_fails_preflight_before_fetching(make_hosts, weights_store):
    (h,) = make_hosts(1, weights_cache_size="1M")
    with pytest.raises(RemoteError) as e:
        apply(deployment([h], weights_store), [h], weights_store)
    text = e.value.render()
    assert f"host {h.name}: preflight failed: disk: the weights need" in text and "short by" in text
    assert h.exec("ls -A /var/lib/inferry/weights").stdout == ""


def test_wrong_gpu_type_fails_preflight(make_hosts, weights_store):
    (h,) = make_hosts(1, gpu="h100")
    with pytest.raises(RemoteError) as e:
        apply(deployment([h], weights_store), [h], weights_store)
    assert ("GPU type: the stack wants H200 (provider.gpu) but the host has NVIDIA H100 80GB HBM3"
            in e.value.render())
    assert h.exec("ls -A /etc/inferry 2>/dev/null").stdout == ""


def test_a_corrupted_weight_file_is_fetched_again_and_checked(make_hosts, weights_store):
    (h,) = make_hosts(1)
    d = deployment([h], weights_store)
    apply(d, [h], weights_store)
    h.exec("cd /var/lib/inferry/weights/llama-3.1-8b-instruct && printf junk > tokenizer.json && rm .inferry-manifest")
    again = apply(d, [h], weights_store).hosts[0].outputs
    assert again["weights"]["fetched"] == 1 and again["service"]["restarts"] == 0
    good = hashlib.sha256(FILES["tokenizer.json"]).hexdigest()
    assert h.exec("sha256sum /var/lib/inferry/weights/llama-3.1-8b-instruct/tokenizer.json").stdout.split()[0] == good


def test_cached_weights_are_size_checked_every_apply_and_hashed_on_request(make_hosts, weights_store, monkeypatch):
    from infra.targets.ssh.providers import VERIFY_WEIGHTS

    (h,) = make_hosts(1)
    d = deployment([h], weights_store)
    apply(d, [h], weights_store)
    folder = "/var/lib/inferry/weights/llama-3.1-8b-instruct"
    h.exec(f"rm {folder}/config.json", check=True)  # the marker stays: the size check finds the gap
    assert apply(d, [h], weights_store).hosts[0].outputs["weights"]["fetched"] == 1
    size = len(FILES["tokenizer.json"])  # same size, other bytes: only hashing finds it
    h.exec(f"head -c {size} /dev/zero > {folder}/tokenizer.json", check=True)
    assert apply(d, [h], weights_store).hosts[0].outputs["weights"]["fetched"] == 0
    monkeypatch.setenv(VERIFY_WEIGHTS, "1")  # `inferry up --verify-weights`
    assert apply(d, [h], weights_store).hosts[0].outputs["weights"]["fetched"] == 1
    good = hashlib.sha256(FILES["tokenizer.json"]).hexdigest()
    assert h.exec(f"sha256sum {folder}/tokenizer.json").stdout.split()[0] == good


def test_the_supervisor_restarts_a_crashed_engine_and_status_counts_it(make_hosts, weights_store):
    from infra.lifecycle import probe
    from infra.targets.ssh.status import host_lines

    (h,) = make_hosts(1)
    d = deployment([h], weights_store)
    apply(d, [h], weights_store)
    key = secrets([h], weights_store)["target.private_key"]
    assert host_lines(d, key)[0].endswith("restarted 0 times since the last apply")
    first = h.engine_starts()[-1]["pid"]
    h.exec(f"kill -KILL {first}", check=True)  # the engine dies; supervise.sh starts it again after 2 s
    deadline = time.monotonic() + 30
    while not (len(h.engine_starts()) == 2 and probe.healthy(f"http://{h.address}:8000/v1")):
        assert time.monotonic() < deadline, h.engine_starts()
        time.sleep(0.2)
    line = host_lines(d, key)[0]
    assert line.startswith(f"host {h.name}: engine running since ") and line.endswith("restarted 1 time since the last apply")
