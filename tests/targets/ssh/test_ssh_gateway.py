"""The gateway for real: Caddy on a docker host, its certificate issued by Pebble over HTTP-01, checked from a
third network namespace standing for the internet (host `net`), with curl verifying the chain against Pebble's
root. What is checked is what the client sees and what the host's kernel and Docker report, not inferry's
reports. The tests run in order on one deployment; each brings it to the state it needs when run alone.
"""
from __future__ import annotations

import json
import shlex

import pytest

from infra.errors import SecretError
from infra.targets.ssh.gateway import gateway_secrets
from tests.support import ssh_direct as ssh_apply
from tests.support.acme import start_acme
from tests.support.ssh_env import MODEL, deployment, plan_for, secrets, weights_store  # noqa: F401

pytestmark = [pytest.mark.docker, pytest.mark.gateway, pytest.mark.acme]
DOMAIN = "llm.inferry.test"
KEY = "sk-gw-5b0e9c2a7f14d83e6a91c0b7d2f45e8a"
NEW_KEY = "sk-gw-e41a7c93b6d05f28c1e7a4b90d3f6c25"
STATE = "/etc/inferry/gateway"  # the gateway's folder: target.service_dir's (the tests' /etc/inferry)


class World:
    """One docker host `gw1` serving behind its gateway, a plain host `net` as the internet, Pebble here."""

    def __init__(self, network, store, tmp):
        self.gw = network.add_hosts(["gw1"], docker=True)[0]
        self.net = network.add_host("gwnet")
        self.store = store
        self.acme = start_acme(tmp / "acme", network.gateway, self.gw.address)
        self.gw.exec(f"echo '{network.gateway} pebble' >> /etc/hosts", check=True)  # the CA's own name
        self.net.exec(f"echo '{self.gw.address} {DOMAIN}' >> /etc/hosts", check=True)  # the stack's DNS record
        (self.gw.shared_dir / "pebble-root.pem").write_text(self.acme.root_pem())

    def deployment(self, previous: bool = False, **gateway):
        g = {"domains": [DOMAIN], "acme": {"directory": self.acme.directory, "ca_root": str(self.acme.directory_root)},
             **gateway}
        extra = {"previous_api_key": {"env": "TEST_PREVIOUS_API_KEY"}} if previous else {}
        d = deployment([self.gw], self.store, runtime="docker", gateway=g)
        return d.model_copy(update={"serving": d.serving.model_copy(update=extra)}) if extra else d

    def apply(self, key: str = KEY, previous: str | None = None, **gateway):
        s = {**secrets([self.gw], self.store), "serving.api_key": key}
        if previous:
            s["serving.previous_api_key"] = previous
        return ssh_apply.apply(plan_for(self.deployment(previous is not None, **gateway)), s)

    def curl(self, path: str, key: str | None = None, *extra: str, url: str = "") -> tuple[int, str, str]:
        """(status, headers, body) of a request from the internet host, the chain verified against Pebble's root."""
        hdr = f"-H {shlex.quote('Authorization: Bearer ' + key)}" if key else ""
        target = url or f"https://{DOMAIN}{path}"
        r = self.net.exec(f"curl -sS --path-as-is -m 20 --cacert /srv/inferry-shared/pebble-root.pem -D /tmp/h "
                          f"-o /tmp/b -w '%{{http_code}}' {hdr} {' '.join(map(shlex.quote, extra))} "
                          f"{shlex.quote(target)}; echo; cat /tmp/h; echo @@; cat /tmp/b", timeout=40)
        code, _, rest = r.stdout.partition("\n")
        headers, _, body = rest.partition("@@\n")
        return int(code or 0), headers, body if code else r.stderr


@pytest.fixture(scope="module")
def world(host_network, weights_store, tmp_path_factory):
    w = World(host_network, weights_store, tmp_path_factory.mktemp("gateway"))
    w.first = w.apply()
    yield w
    ssh_apply.destroy(plan_for(w.deployment()), secrets([w.gw], weights_store))
    w.acme.stop()
    for h in (w.gw, w.net):
        host_network.remove_host(h)


def test_the_client_verifies_a_pebble_certificate_and_gets_an_answer(world):
    assert world.first.endpoint == f"https://{DOMAIN}/v1"
    code, _, body = world.curl("/v1/chat/completions", KEY, "-H", "Content-Type: application/json", "-d",
                               json.dumps({"model": MODEL, "max_tokens": 4,
                                           "messages": [{"role": "user", "content": "hi"}]}))
    assert code == 200 and json.loads(body)["choices"], body
    issuer = world.net.exec(f"echo | openssl s_client -connect {DOMAIN}:443 -servername {DOMAIN} 2>/dev/null | "
                            "openssl x509 -noout -issuer").stdout
    assert "Pebble Intermediate" in issuer, issuer  # issued by the ACME server, not a self-signed fallback


def test_port_80_only_redirects(world):
    code, headers, _ = world.curl("", None, url=f"http://{DOMAIN}/v1/models?x=1")
    assert code == 308 and f"location: https://{DOMAIN}/v1/models?x=1" in headers.lower()


def test_from_the_internet_only_the_gateway_answers(world):
    """The engine's port is published on loopback only: from another namespace it is refused."""
    probe = world.net.exec(f"for p in 8000 443 80; do curl -s -o /dev/null -m 5 -w \"$p %{{http_code}} "
                           f"%{{exitcode}}\\n\" http://{world.gw.address}:$p/health; done").stdout.split("\n")
    refused = dict(line.split(" ", 1) for line in probe if line)
    assert refused["8000"] == "000 7"  # curl's 7: connection refused
    assert refused["80"].startswith("308") and not refused["443"].endswith(" 7")
    ports = world.gw.exec("ss -Hltn").stdout
    assert "127.0.0.1:8000" in ports and "0.0.0.0:8000" not in ports and "*:8000" not in ports, ports


@pytest.mark.parametrize("path", ["/metrics", "/docs", "/openapi.json", "/version", "/pause", "/collective_rpc",
                                  "/v1/load_lora_adapter", "/update_weights_from_disk", "/v1/models/../../metrics"])
def test_every_other_path_is_refused_even_with_a_key(world, path):
    code, _, body = world.curl(path, KEY)
    assert code == 404 and "not found" in body, (path, code, body)


def test_health_without_a_key_says_only_the_status_and_the_api_needs_one(world):
    code, headers, body = world.curl("/health")
    assert code == 200 and body == "" and "x-engine" not in headers.lower()
    code, headers, _ = world.curl("/v1/models")
    assert code == 401 and "www-authenticate: bearer" in headers.lower()
    assert world.curl("/v1/models", "sk-gw-wrong-0000000000000000000000")[0] == 401
    code, _, body = world.curl("/v1/models", KEY)
    assert code == 200 and MODEL in body


def test_the_engine_carries_no_client_key(world):
    cid = world.gw.exec("docker ps -q --filter label=com.docker.compose.service=engine").stdout.split()[0]
    env = json.loads(world.gw.exec(f"docker inspect {cid}", check=True).stdout)[0]["Config"]["Env"]
    assert not any(e.startswith("VLLM_API_KEY=") for e in env) and not any(KEY in e for e in env)


def test_status_and_drain_read_the_engine_over_ssh_while_the_gateway_refuses_metrics(world):
    """/metrics never crosses the public door; `inferry status` and drain read it on the host, over SSH."""
    from types import SimpleNamespace

    from infra.lifecycle.drain import busy_in
    from infra.lifecycle.status import replica_status
    from infra.targets.ssh.target import TARGET

    chat = json.dumps({"model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
    assert world.curl("/v1/chat/completions", KEY, "-H", "Content-Type: application/json", "-d", chat)[0] == 200
    assert world.curl("/metrics", KEY)[0] == 404
    keys = secrets([world.gw], world.store)
    reads = TARGET.engine_metrics(SimpleNamespace(deployment=world.deployment()),
                                  lambda ref, field: keys["target.private_key"])
    (status,) = replica_status(reads)
    assert status.source in (f"host {world.gw.name}", f"host {world.gw.address}"), status
    assert status.metrics is not None and status.metrics.kv_cache_usage is not None, status
    # The request counted, as the engine itself says on the host's loopback (read here, not by inferry).
    text = world.gw.exec("curl -s http://127.0.0.1:8000/metrics", check=True).stdout
    count = next(float(line.split()[-1]) for line in text.splitlines()
                 if line.startswith("vllm:time_to_first_token_seconds_count"))
    assert count >= 1 and status.metrics.ttft_count == int(count)
    assert busy_in(reads[0].text) == 0 and status.lines()[0] == f"{status.source} engine metrics:"


def test_the_host_keeps_an_access_log_without_keys_queries_or_addresses(world):
    from infra.gateway.caddy import key_id

    assert world.curl("/v1/models?user=alice", KEY)[0] == 200
    log = f"{world.deployment().target.service_dir}/gateway/access.log"
    mode = world.gw.exec(f"stat -c %a {log}", check=True).stdout.strip()
    lines = [json.loads(x) for x in world.gw.exec(f"cat {log}", check=True).stdout.splitlines()]
    mine = [e for e in lines if e.get("key_id") == key_id(KEY) and e["request"]["uri"] == "/v1/models"]
    assert mode == "600" and mine and mine[-1]["status"] == 200, lines[-3:]
    text = json.dumps(lines)
    assert KEY not in text and "alice" not in text and world.net.address not in text


def test_a_body_over_the_limit_is_refused(world):
    big = world.net.exec("head -c 34000000 /dev/zero | tr '\\0' a > /tmp/big; echo ok").stdout
    assert "ok" in big
    code, _, _ = world.curl("/v1/completions", KEY, "-H", "Content-Type: application/json", "--data-binary", "@/tmp/big")
    assert code == 413


def _polling(world, key: str, seconds: float):
    """A client on the internet host sending a request every 50 ms for SECONDS (in a thread): its statuses."""
    import threading

    out: list[str] = []
    cmd = (f"end=$(( $(date +%s) + {int(seconds)} )); while [ $(date +%s) -lt $end ]; do "
           f"curl -s -o /dev/null -m 5 -w '%{{http_code}}\\n' --cacert /srv/inferry-shared/pebble-root.pem "
           f"-H 'Authorization: Bearer {key}' https://{DOMAIN}/v1/models; sleep 0.05; done")
    t = threading.Thread(target=lambda: out.extend(world.net.exec(cmd, timeout=seconds + 30).stdout.split()))
    t.start()
    return t, out


def test_a_key_rotates_with_no_failed_request_and_no_engine_restart(world):
    starts = len(world.gw.engine_starts())
    t, old_client = _polling(world, KEY, 8)  # a client still on the old key while the new one is added
    world.apply(key=NEW_KEY, previous=KEY)
    t.join()
    assert old_client and set(old_client) == {"200"}, old_client
    assert world.curl("/v1/models", NEW_KEY)[0] == 200
    t, new_client = _polling(world, NEW_KEY, 8)  # a client on the new key while the old one is removed
    world.apply(key=NEW_KEY)
    t.join()
    assert new_client and set(new_client) == {"200"}, new_client
    assert world.curl("/v1/models", KEY)[0] == 401
    assert len(world.gw.engine_starts()) == starts  # the engine never restarted for a key change
    world.apply()  # back to the module's key


def _caddy_status(host) -> dict:
    """The running Caddy's /proc status fields, as the gateway host's kernel reports them."""
    out = host.exec(f"cat /proc/$(cat {STATE}/caddy.pid)/status", check=True).stdout
    return dict(line.split(":\t", 1) for line in out.splitlines() if ":\t" in line)


def test_caddy_runs_as_its_own_user_holding_one_capability(world):
    """The process that faces the internet is not root: its user, its one capability (ports 80 and 443) and no
    new privileges as the kernel reports them; its folder and the config with the keys are that user's alone."""
    uid = world.gw.exec("id -u inferry-gateway", check=True).stdout.strip()
    f = _caddy_status(world.gw)
    assert uid != "0" and f["Uid"].split() == [uid] * 4 and f["Gid"].split()[0] != "0"
    assert int(f["CapEff"], 16) == 1 << 10 and int(f["CapBnd"], 16) == 1 << 10 and f["NoNewPrivs"].strip() == "1"
    owners = world.gw.exec(f"stat -c '%U %a' {STATE} {STATE}/caddy.json", check=True).stdout.split("\n")
    assert owners[:2] == ["inferry-gateway 700", "inferry-gateway 600"]
    assert world.curl("/v1/models", KEY)[0] == 200  # serving on 443 as that user


def test_a_caddy_left_running_as_root_is_restarted_as_its_user(world):
    gw = world.gw
    # As an inferry from before the gateway's user left it: the same config, its folder root's, Caddy as root.
    gw.exec(f"p=$(cat {STATE}/caddy.pid); kill $p; while kill -0 $p 2>/dev/null; do sleep 0.1; done; "
            f"chown -R root:root {STATE} && caddy start --config {STATE}/caddy.json --pidfile {STATE}/caddy.pid "
            ">/dev/null 2>&1 </dev/null", check=True, timeout=60)
    assert _caddy_status(gw)["Uid"].split()[0] == "0"
    world.apply()
    assert _caddy_status(gw)["Uid"].split()[0] == gw.exec("id -u inferry-gateway", check=True).stdout.strip()
    assert world.curl("/v1/models", KEY)[0] == 200


def test_a_pid_planted_in_the_gateway_folder_never_makes_root_signal_that_process(world):
    """The folder is the gateway user's: a compromised Caddy could write any pid into its pid file. The apply,
    which runs as root, stops only a process that is a Caddy."""
    gw = world.gw
    gw.exec(f"p=$(cat {STATE}/caddy.pid); kill $p; while kill -0 $p 2>/dev/null; do sleep 0.1; done", check=True,
            timeout=60)  # Caddy gone, as after a crash
    victim = gw.exec("setsid sleep 600 >/dev/null 2>&1 </dev/null & echo $!", check=True).stdout.strip()
    gw.exec(f"setpriv --reuid=inferry-gateway --regid=inferry-gateway --clear-groups sh -c "
            f"'echo {victim} > {STATE}/caddy.pid'", check=True)  # written as that user can
    try:
        world.apply()
        assert gw.exec(f"kill -0 {victim} && echo alive").stdout.strip() == "alive"
        assert world.curl("/v1/models", KEY)[0] == 200  # and Caddy runs again
    finally:
        gw.exec(f"kill {victim}")


def test_a_weak_key_is_refused_naming_the_field():
    with pytest.raises(SecretError) as e:
        gateway_secrets({"serving.api_key": "sk-test-" + "7" * 24})
    assert "serving.api_key" in e.value.render() and "128" in e.value.render() and "openssl rand" in e.value.render()
    with pytest.raises(SecretError):
        gateway_secrets({"serving.api_key": "0123456789abcdef"})  # 64 bits
    assert gateway_secrets({"serving.api_key": KEY}).api_keys == (KEY,)


@pytest.mark.parametrize("stack", ["eu-ssh", "eu-ssh-sglang"])
def test_the_bundled_stacks_gateway_config_is_one_caddy_accepts(stack, tmp_path):
    """Caddy itself (scripts/tools.sh's build) validates the config inferry renders for the bundled stacks."""
    import dataclasses
    import subprocess

    from infra.gateway.caddy import GatewaySecrets, caddy_json
    from infra.stack.stackfile import load_stack
    from infra.targets.ssh.plan import plan_deployment
    from tests.support.realengine import TOOLS_BIN

    g = plan_deployment(load_stack(stack).deployment).gateway
    plan = dataclasses.replace(g.plan, state_dir=str(tmp_path))  # its log and data where this test may write
    (tmp_path / "caddy.json").write_text(caddy_json(plan, GatewaySecrets((KEY,))))
    r = subprocess.run([str(TOOLS_BIN / "caddy"), "validate", "--config", str(tmp_path / "caddy.json")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "Valid configuration" in r.stdout + r.stderr, r.stderr[-2000:]


def test_destroy_removes_the_gateway_its_folder_and_its_user(world):
    """Last: leaving the provider leaves no Caddy, no folder and no system user behind."""
    ssh_apply.destroy(plan_for(world.deployment()), secrets([world.gw], world.store))
    assert world.gw.exec(f"test -e {STATE} || echo gone").stdout == "gone\n"
    assert world.gw.exec("id -u inferry-gateway 2>/dev/null || echo none").stdout.strip() == "none"
    assert world.gw.exec("pgrep -x caddy || echo none").stdout.strip() == "none"
