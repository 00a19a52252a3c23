"""Nothing half-applied: an unhealthy engine after an update brings the previous files back; after a create, nothing."""
from __future__ import annotations

import json
import urllib.request

import pytest

from infra.errors import RemoteError
from infra.targets.ssh.rollback import backup_command
from infra.targets.ssh.session import Session
from tests.support.ssh_env import API_KEY, MODEL, apply, deployment, ops_log, fresh_sessions, weights_store  # noqa: F401
from tests.targets.ssh.test_ssh_apply import cached_weights, chat

LAUNCHER, NOT_READY = "/etc/inferry/run-engine.sh", "engine never became ready"


def processes(host) -> list[str]:
    """Command lines of every process on the host."""
    out = host.exec("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done").stdout
    return [ln for ln in out.splitlines() if ln.strip()]


def models(endpoint: str) -> list[str]:
    """Model ids /v1/models lists (with the key)."""
    req = urllib.request.Request(f"{endpoint}/models", headers={"Authorization": f"Bearer {API_KEY}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return [m["id"] for m in json.load(r)["data"]]


def test_unhealthy_update_restores_the_previous_files_and_engine(make_hosts, weights_store, monkeypatch):
    (h,) = make_hosts(1)
    d = deployment([h], weights_store, health_timeout_s=5)
    endpoint = apply(d, [h], weights_store).endpoint
    old = h.exec(f"cat {LAUNCHER}").stdout
    h.set_standin(never_healthy=True)  # engines started from now on never get healthy
    real_run, seen = Session.run, {}

    def run(self, cmd, step, **kw):
        if step == "restore the previous service files":
            seen["kept"] = h.exec("cd /etc/inferry && stat -c '%a %n' *.inferry-prev").stdout
            h.set_standin()  # the fault belongs to the new option: the previous engine starts as before
        return real_run(self, cmd, step, **kw)

    monkeypatch.setattr(Session, "run", run)
    with pytest.raises(RemoteError) as e:
        apply(deployment([h], weights_store, engine={"max_num_seqs": 64}, health_timeout_s=5), [h], weights_store)
    monkeypatch.setattr(Session, "run", real_run)
    text = e.value.render()
    assert f"host {h.name}: the engine did not become healthy within 5s" in text and NOT_READY in text
    assert "the previous configuration was restored and is serving again" in text
    assert seen["kept"] == "755 run-engine.sh.inferry-prev\n"
    assert h.exec(f"cat {LAUNCHER}").stdout == old and "--max-num-seqs" not in old
    assert "--max-num-seqs" not in " ".join(h.engine_starts()[-1]["argv"])
    assert h.exec("find /etc/inferry -name '*.inferry-prev*'").stdout == ""
    assert chat(endpoint) and models(endpoint) == [MODEL]
    before = ops_log(h)
    again = apply(d, [h], weights_store)
    assert (again.count("writes"), again.count("restarts")) == (0, 0) and ops_log(h) == before


def test_kept_copy_of_the_env_file_stays_private(make_hosts, weights_store):
    (h,) = make_hosts(1)
    apply(deployment([h], weights_store), [h], weights_store)
    env = "/etc/inferry/inferry.env"
    h.exec(backup_command((env,)), check=True)
    assert h.exec(f"stat -c '%a %U' {env}.inferry-prev").stdout == "600 root\n"
    assert h.exec(f"cmp {env} {env}.inferry-prev && ls /etc/inferry | grep -c tmp").stdout.strip() == "0"


def test_unhealthy_create_leaves_nothing_running(make_hosts, weights_store):
    (h,) = make_hosts(1)
    h.set_standin(never_healthy=True)
    with pytest.raises(RemoteError) as e:
        apply(deployment([h], weights_store, health_timeout_s=5), [h], weights_store)
    text = e.value.render()
    assert f"host {h.name}: the engine did not become healthy within 5s" in text and NOT_READY in text
    assert "nothing was left running" in text
    assert h.engine_starts(), "the engine was started"
    assert not [p for p in processes(h) if "supervise.sh" in p or " serve " in p]
    assert h.exec("test -e /etc/inferry || echo gone").stdout == "gone\n"  # the service folder, as destroy leaves it
    assert len(cached_weights(h)) == 4  # the weights stay


def test_rolling_update_stops_at_the_first_unhealthy_replica_and_leaves_the_rest_serving(make_hosts, weights_store,
                                                                                         monkeypatch):
    hosts = make_hosts(2)
    d = deployment(hosts, weights_store, health_timeout_s=5)
    first = apply(d, hosts, weights_store)
    old = [h.exec(f"cat {LAUNCHER}").stdout for h in hosts]
    starts = [len(h.engine_starts()) for h in hosts]
    for h in hosts:
        h.set_standin(never_healthy=True)  # the new option breaks every engine it reaches
    real_run = Session.run

    def run(self, cmd, step, **kw):
        if step == "restore the previous service files":
            hosts[0].set_standin()
        return real_run(self, cmd, step, **kw)

    monkeypatch.setattr(Session, "run", run)
    with pytest.raises(RemoteError) as e:
        apply(deployment(hosts, weights_store, engine={"max_num_seqs": 64}, health_timeout_s=5), hosts, weights_store)
    monkeypatch.setattr(Session, "run", real_run)
    text = e.value.render()
    assert f"host {hosts[0].name}: the engine did not become healthy" in text
    assert f"host {hosts[1].name}: engine not changed: the rolling update stopped at host {hosts[0].name}" in text
    assert [h.exec(f"cat {LAUNCHER}").stdout for h in hosts] == old  # the first restored, the second never touched
    assert len(hosts[1].engine_starts()) == starts[1], "the second replica was restarted"
    assert len(hosts[0].engine_starts()) == starts[0] + 2  # the bad option, then the restored one
    assert all(chat(url) for url in first.endpoints)


def test_parallel_rollout_changes_every_replica_at_once(make_hosts, weights_store):
    hosts = make_hosts(2)
    d = deployment(hosts, weights_store, rollout="parallel")
    apply(d, hosts, weights_store)
    for h in hosts:
        h.set_standin(never_healthy=True)
    with pytest.raises(RemoteError) as e:
        apply(deployment(hosts, weights_store, engine={"max_num_seqs": 64}, health_timeout_s=5, rollout="parallel"),
              hosts, weights_store)
    assert all(f"host {h.name}: the engine did not become healthy" in e.value.render() for h in hosts)
