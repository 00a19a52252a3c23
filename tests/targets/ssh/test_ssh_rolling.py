"""Rolling without a queue of hosts: a first create starts every engine at once, a no-op checks every host at once,
and only a host that differs restarts. Witnessed on the hosts: their own curl records and engine start records."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from infra.errors import RemoteError
from tests.support import ssh_direct as ssh_apply
from infra.targets.ssh import pool, providers
from infra.targets.ssh.rollout import ROLLING, Rollout
from infra.targets.ssh.session import Session
from tests.support.ssh_barrier import HealthBarrier
from tests.support.ssh_env import apply, deployment, ops_log, plan_for, secrets, weights_store  # noqa: F401
from tests.targets.ssh.test_ssh_apply import chat

LAUNCHER = "/etc/inferry/run-engine.sh"


@pytest.fixture(scope="module")
def four(host_network, weights_store):
    """Four hosts, default rollout (rolling); engines take a moment to come up, as real ones do."""
    hosts = host_network.add_hosts([f"roll{i}" for i in range(4)])
    for h in hosts:
        h.set_standin(startup_s=0.5)
    d = deployment(hosts, weights_store)
    assert plan_for(d).rolling
    yield hosts, d, weights_store
    pool.close_all()
    ssh_apply.destroy(plan_for(d), secrets(hosts, weights_store))
    for h in hosts:
        host_network.remove_host(h)


def engine(h) -> tuple[int, float]:
    """(pid, start time) of the engine running on the host now, from the host's own start records."""
    last = h.engine_starts()[-1]
    assert h.exec(f"kill -0 {last['pid']}").returncode == 0, f"engine {last['pid']} not running on {h.name}"
    return last["pid"], last["time"]


def barrier(hosts) -> HealthBarrier:
    pool.close_all()  # each run from fresh connections, as a new command would
    return HealthBarrier(hosts)


def test_first_create_starts_every_engine_at_once(four):
    hosts, d, store = four
    with barrier(hosts) as b:
        out = apply(d, hosts, store)
        # A host's health gate begins once its engine was started; gates that overlap mean every engine was
        # started before any gate ended: no host waited for another to become healthy.
        assert b.all_at_once(), b.spans()
    assert [len(h.engine_starts()) for h in hosts] == [1] * 4 and out.count("restarts") == 4


def test_noop_checks_every_host_at_once_and_restarts_nothing(four):
    hosts, d, store = four
    before = [(ops_log(h), engine(h)) for h in hosts]
    with barrier(hosts) as b:
        out = apply(d, hosts, store)
        assert b.all_at_once(), b.spans()
    assert out.count("writes") == 0 and out.count("restarts") == 0
    assert [(ops_log(h), engine(h)) for h in hosts] == before


def test_only_the_host_that_differs_restarts(four):
    hosts, d, store = four
    before = [engine(h) for h in hosts]
    hosts[2].exec(f"echo '# edited by hand' >> {LAUNCHER}", check=True)
    pool.close_all()
    out = apply(d, hosts, store)
    after = [engine(h) for h in hosts]
    assert [a != b for a, b in zip(after, before)] == [False, False, True, False]
    assert "# edited by hand" not in hosts[2].exec(f"cat {LAUNCHER}").stdout
    assert out.count("restarts") == 1


def test_under_pulumi_a_failed_turn_ends_the_rollout_and_every_other_replica_keeps_serving(four, monkeypatch):
    """The providers as Pulumi's plugin runs them (every host's update at once, `__rolling` set): one serving
    engine restarts at a time; the first that fails is rolled back and no other engine is touched."""
    hosts, d, store = four
    monkeypatch.setattr(providers, "ROLLOUT", Rollout())  # one per `pulumi up`: the plugin is one process each
    pool.close_all()
    bad = plan_for(deployment(hosts, store, engine={"max_num_seqs": 64}))
    keys = secrets(hosts, store)
    props = [{**ssh_apply._service_props(hp, ssh_apply._prepare_host(hp, bad, keys), bad, keys), ROLLING: True}
             for hp in bad.hosts]
    before = [len(h.engine_starts()) for h in hosts]
    by_label = {h.name: h for h in hosts}
    for h in hosts:
        h.set_standin(never_healthy=True)  # the next engine started anywhere never becomes healthy
    real_run = Session.run

    def run(self, cmd, step, **kw):
        if step == "restore the previous service files":
            by_label[self.conn.label].set_standin(startup_s=0.5)  # the restored engine comes up again
        return real_run(self, cmd, step, **kw)

    monkeypatch.setattr(Session, "run", run)

    def update(p: dict):
        try:
            return providers.ServiceProvider().update("id", {}, p)
        except RemoteError as e:
            return e

    with ThreadPoolExecutor(len(hosts)) as ex:
        results = list(ex.map(update, props))
    monkeypatch.setattr(Session, "run", real_run)
    for h in hosts:
        h.set_standin(startup_s=0.5)
    new = [len(h.engine_starts()) - n for h, n in zip(hosts, before)]
    assert sorted(new) == [0, 0, 0, 2]  # one host: the bad engine, then the restored one; the others untouched
    failed = hosts[new.index(2)].name
    texts = [r.render() for r in results]
    assert "the previous configuration was restored and is serving again" in texts[new.index(2)]
    assert sum(f"engine not changed: the rolling update stopped at host {failed}" in t for t in texts) == 3
    assert all(chat(f"http://{h.address}:8000/v1") for h in hosts)


def test_a_batch_of_engines_restarts_at_once_and_the_rest_keep_serving(four):
    """target.max_unavailable: 50% of four hosts: two engines restart at once, then the other two; at every
    moment at least two replicas answer (N - batch), witnessed by a client polling every replica."""
    from tests.support.progharness import Poller

    hosts, d, store = four
    batched = deployment(hosts, store, engine={"max_num_seqs": 48}, max_unavailable="50%")
    assert plan_for(batched).batch == 2
    before = [len(h.engine_starts()) for h in hosts]
    poller = Poller([(f"http://{h.address}:8000", secrets(hosts, store)["serving.api_key"]) for h in hosts])
    poller.start()
    pool.close_all()
    out = apply(batched, hosts, store)
    samples = poller.finish()
    starts = sorted(s["time"] for h, n in zip(hosts, before) for s in h.engine_starts()[n:])
    assert len(starts) == 4 and out.count("restarts") == 4
    # the engines come up 0.5 s after they start: the first two started together, the next two only after them
    assert starts[1] < starts[0] + 0.5 and starts[2] > starts[1] + 0.5, starts
    assert samples and all(sum(s) >= 2 for s in samples), "more than two replicas were down at once"
    apply(d, hosts, store)  # back to the module's deployment


def test_rollout_turns_are_as_wide_as_asked_and_end_at_the_first_failure():
    """Rollout(width): never more than `width` turns held at once; after a failed turn none is given."""
    import threading
    import time

    rollout, held, most, lock = Rollout().width(3), [0], [0], threading.Lock()

    def take(label: str) -> str:
        try:
            with rollout.turn(label):
                with lock:
                    held[0] += 1
                    most[0] = max(most[0], held[0])
                time.sleep(0.05)
                with lock:
                    held[0] -= 1
                if label == "h2":
                    raise RuntimeError("unhealthy")
        except (RuntimeError, RemoteError) as e:
            return type(e).__name__
        return "ok"

    with ThreadPoolExecutor(3) as ex:
        first = list(ex.map(take, ["h1", "h2", "h3"]))
    assert most[0] == 3 and first == ["ok", "RuntimeError", "ok"]
    assert take("h4") == "RemoteError" and "stopped at host h2" in rollout.refusal("h4").render()
