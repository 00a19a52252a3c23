"""The real Pulumi engine on real SSH hosts: a stack's whole life through `inferry` and `pulumi` commands.

Real: the Pulumi CLI and engine (scripts/tools.sh), its local file backend and passphrase secrets, Pulumi's
dynamic-provider plugin, two OpenSSH hosts (tests/hosts), an rclone S3 store. Stand-in: the GPU engine.
`pulumi refresh/destroy/stack export/config` run as typed. The module is one stack's life in order, and each
test also runs alone: the `deployed` fixture brings the stack up first when nothing is (tests that need it
down come first in the module, on fresh hosts).
"""
from __future__ import annotations

import copy
import hashlib
import re
import subprocess

import pytest

from infra.lifecycle import probe
from tests.support.progharness import Poller
from tests.support.realengine import Project, model_store
from tests.support.ssh_env import BUCKET, FILES, MODEL, PREFIX, ops_log
from tests.support.ssh_barrier import HealthBarrier

API_KEY = "sk-real-engine-8d2f6a1c9e4b7035f1a8c6e2d9b4f703"  # the gateway takes 128-bit keys
S3_KEYS = ("re-access-canary-1", "re-secret-canary-" + "8" * 16)
SERVICE = "pulumi-python:dynamic/inferry:SshService"


class World:
    """Two hosts, one store, one project with stack `two` (rolling, a plain-HTTP gateway on the first host)."""

    def __init__(self, hosts, server, project: Project, private_key: str):
        self.hosts, self.server, self.project, self.private_key = hosts, server, project, private_key

    def deployment(self, **engine) -> dict:
        """The stack's deployment, with engine options changed."""
        h = self.hosts
        return {
            "model": {"name": MODEL, "weights": f"s3://{BUCKET}/{PREFIX}"},
            "engine": {"kind": "vllm", "max_model_len": 4096, **engine},
            "target": {"kind": "ssh", "runtime": "process", "health_timeout_s": 30,
                       "private_key": {"config": "sshPrivateKey"}, "gateway": {"host": h[0].name, "tls": "off", "http_port": 8080},
                       # the test network stands for the private one the second host's engine listens on
                       "hosts": [{"address": x.address, "name": x.name, "host_key": x.host_key_line,
                                  **({"private_address": x.address} if i else {})} for i, x in enumerate(h)]},
            "storage": {"endpoint": self.server.endpoint, "region": self.server.region, "bucket": BUCKET,
                        "access_key_id": {"config": "s3AccessKey"}, "secret_access_key": {"config": "s3SecretKey"}},
            "provider": {"name": "test-cloud", "region": "eu-test", "gpu": "H200", "price_per_gpu_hour": 3.0},
            "serving": {"port": 8000, "api_key": {"config": "apiKey"}},
        }

    def outputs(self, stack: str, resource: str) -> dict:
        """A resource's outputs in the stack's state."""
        return self.project.resources(stack)[resource]["outputs"]

    def replica(self, i: int) -> str:
        """The i-th host's engine URL (the second's: the first host's engine listens on its loopback only)."""
        return f"http://{self.hosts[i].address}:8000"

    def replica_status(self, i: int, path: str = "/health") -> int:
        """The HTTP status the i-th host's engine answers on its own host (0: nothing answered)."""
        bind = "127.0.0.1" if i == 0 else self.hosts[i].address
        out = self.hosts[i].exec(f"curl -s -o /dev/null -m 3 -w '%{{http_code}}' http://{bind}:8000{path}").stdout
        return int(out or 0)


@pytest.fixture(scope="module")
def world(host_network, s3_server_factory, tmp_path_factory, installed):
    tmp = tmp_path_factory.mktemp("real-engine")
    server = model_store(s3_server_factory, host_network, S3_KEYS, tmp)
    hosts = host_network.add_hosts(["re1", "re2"])
    for h in hosts:
        h.set_standin(startup_s=0.5)  # a restart is a window a client could see
    w = World(hosts, server, Project(tmp / "project", installed[1]), host_network.client_key_text)
    w.project.write_stack("two", w.deployment(), {"sshPrivateKey": w.private_key, "apiKey": API_KEY,
                                                  "s3AccessKey": S3_KEYS[0], "s3SecretKey": S3_KEYS[1]})
    yield w
    w.project.pulumi("destroy", "--yes", "--stack", "two", check=False)
    for h in hosts:
        host_network.remove_host(h)


@pytest.fixture
def deployed(world):
    """The stack up as its stack file says, as the tests before leave it: `inferry up` when nothing is."""
    if not world.project.resources("two"):
        world.project.inferry("up", "two")
    return world


def changes(stdout: str) -> list[tuple[str, str]]:
    """(verb, resource name) of each finished step in `inferry up/destroy` progress."""
    return re.findall(r"^  (created|updated|replaced|deleted) \S+ (\S+)$", stdout, re.M)


def test_preview_shows_the_plan_and_creates_nothing(world):
    r = world.project.inferry("preview", "two")
    assert re.search(r"two would change: 12 create$", r.stdout, re.M), r.stdout
    assert world.project.resources("two") == {}
    assert all(ops_log(h) == [] and h.engine_starts() == [] for h in world.hosts)


def test_up_streams_progress_and_serves_with_the_key_only(world):
    with HealthBarrier(world.hosts) as barrier:
        proc = subprocess.Popen([*world.project.inferry_argv(), "up", "two"], cwd=world.project.folder,
                                env=world.project.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines, streamed = [], False
        for line in proc.stdout:
            lines.append(line)
            if "created pulumi-python:dynamic/inferry:SshHost" in line:
                streamed = proc.poll() is None  # the line came while the update still ran
        assert proc.wait() == 0, "".join(lines)
        # a first create (nothing serving yet) starts every engine at once: the hosts' health gates overlapped
        assert barrier.all_at_once(), barrier.spans()
    assert streamed, "progress arrived only at the end"
    out = "".join(lines)
    assert len(changes(out)) == 11 and {v for v, _ in changes(out)} == {"created"}  # and the Stack (the Deployment component is one of them)
    assert f"endpoint: http://{world.hosts[0].address}:8080/v1" in out
    lb = f"http://{world.hosts[0].address}:8080"
    assert probe.chat_check(lb + "/v1", API_KEY, MODEL)
    assert probe.get(lb + "/v1/models", 3, None)[0] == 401
    assert probe.get(lb + "/v1/models", 3, "sk-wrong")[0] == 401
    assert probe.get(world.replica(0) + "/v1/models", 3, API_KEY)[0] == 0  # loopback only: refused from here
    for h in world.hosts:  # the weights each host holds are the bytes pushed, checked here, not by inferry
        model_dir = world.outputs("two", f"ssh-{h.name}-weights")["model_dir"]
        for rel, data in FILES.items():
            assert hashlib.sha256(h.path(f"{model_dir}/{rel}").read_bytes()).digest() == hashlib.sha256(data).digest()


@pytest.mark.usefixtures("deployed")
def test_second_up_changes_nothing_on_any_host(world):
    before = [(ops_log(h), len(h.engine_starts())) for h in world.hosts]
    r = world.project.inferry("up", "two")
    assert changes(r.stdout) == [] and re.search(r"done in \S+: 12 unchanged$", r.stdout, re.M), r.stdout
    assert [(ops_log(h), len(h.engine_starts())) for h in world.hosts] == before


@pytest.mark.usefixtures("deployed")
def test_up_runs_the_cli_twice_and_never_has_it_decrypt_secrets(world, tmp_path):
    """Every `pulumi` an `inferry up` runs, as the CLI saw it: `version` once (inferry's check; the Automation
    API's own is skipped), then `up --stack NAME` and nothing else: no `stack select`, and no `stack output`
    twice and `stack history` after it (outputs and change counts come from the update's own events); no
    secret in argv, no --show-secrets."""
    shim, log = tmp_path / "bin", tmp_path / "pulumi-argv.log"
    shim.mkdir()
    real = subprocess.run(["sh", "-c", "command -v pulumi"], env=world.project.env, capture_output=True, text=True,
                          check=True).stdout.strip()
    (shim / "pulumi").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\nexec {real} "$@"\n')
    (shim / "pulumi").chmod(0o755)
    env = {**world.project.env, "PATH": f"{shim}:{world.project.env['PATH']}"}
    r = subprocess.run([*world.project.inferry_argv(), "up", "two"], cwd=world.project.folder, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    calls = log.read_text().splitlines()
    commands = [next(w for w in c.split() if not w.startswith("-")) for c in calls]
    assert commands == ["version", "up"] and "--stack two" in calls[1], calls
    assert not any("--show-secrets" in c for c in calls), calls
    assert f"endpoint: http://{world.hosts[0].address}:8080/v1" in r.stdout, r.stdout
    assert not any(secret in c for c in calls for secret in (API_KEY, *S3_KEYS)), calls
    log.unlink()
    r = subprocess.run([*world.project.inferry_argv(), "outputs", "two"], cwd=world.project.folder, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and f"http://{world.hosts[0].address}:8080/v1" in r.stdout, r.stdout + r.stderr
    calls = log.read_text().splitlines()
    commands = [[w for w in c.split() if not w.startswith("-")][:2] for c in calls]
    # `stack output` once, never --show-secrets: the Automation API runs it twice, the second decrypting
    assert commands == [["version"], ["stack", "output"]] and not any("--show-secrets" in c for c in calls), calls


@pytest.mark.usefixtures("deployed")
def test_verify_weights_hashes_every_file_again_and_repairs_only_that(world):
    model_dir = world.outputs("two", "ssh-re1-weights")["model_dir"]
    size = len(FILES["tokenizer.json"])  # same size, other bytes: a plain up (size check) does not see it
    world.hosts[0].exec(f"head -c {size} /dev/zero > {model_dir}/tokenizer.json", check=True)
    assert changes(world.project.inferry("up", "two").stdout) == []
    r = world.project.inferry("up", "two", "--verify-weights")
    assert sorted(changes(r.stdout)) == [("updated", "ssh-re1-weights"), ("updated", "ssh-re2-weights")]
    data = world.hosts[0].path(f"{model_dir}/tokenizer.json").read_bytes()
    assert hashlib.sha256(data).digest() == hashlib.sha256(FILES["tokenizer.json"]).digest()
    assert world.outputs("two", "ssh-re1-weights")["fetched"] == 1 and world.outputs("two", "ssh-re2-weights")["fetched"] == 0


@pytest.mark.usefixtures("deployed")
def test_engine_option_updates_services_one_host_at_a_time(world):
    world.project.set_deployment("two", world.deployment(max_num_seqs=64))
    r = world.project.inferry("preview", "two")
    assert re.search(r"two would change: 2 update, 10 unchanged$", r.stdout, re.M), r.stdout
    assert sorted(re.findall(r"^  would (\S+) \S+ (\S+)$", r.stdout, re.M)) == [("update", "ssh-re1-service"), ("update", "ssh-re2-service")]
    starts = [len(h.engine_starts()) for h in world.hosts]
    poller = Poller([(f"http://{world.hosts[0].address}:8080", API_KEY), (world.replica(1), API_KEY)])
    poller.start()
    r = world.project.inferry("up", "two")
    samples = poller.finish()
    assert sorted(changes(r.stdout)) == [("updated", "ssh-re1-service"), ("updated", "ssh-re2-service")]
    new = [h.engine_starts()[n:] for h, n in zip(world.hosts, starts)]
    assert [len(x) for x in new] == [1, 1] and all("64" in x[0]["argv"] for x in new)
    # rolling: one host restarted only after the other's new engine had started and come up (turns are taken
    # in the order the hosts are ready, not by their place in the stack)
    first, second = sorted(x[0]["time"] for x in new)
    assert second > first + 0.5
    assert all(s[0] for s in samples), f"the gateway stopped answering: {poller.failures()[:5]}"


@pytest.mark.usefixtures("deployed")
def test_refresh_records_drift_and_up_repairs_it(world):
    svc1, svc2 = (world.outputs("two", f"ssh-{h.name}-service") for h in world.hosts)
    world.hosts[0].exec(f"kill -TERM -$(cat {svc1['service_dir']}/supervisor.pid)", check=True)
    edited = svc2["files"][0]["path"]
    world.hosts[1].exec(f"echo '# edited by hand' >> {edited}", check=True)
    # and the connection to the first host drops under its reads (a network blip): they are asked again
    world.hosts[0].drop_connections_on("sha256sum")
    r = world.project.inferry("refresh", "two")
    dropped = world.hosts[0].fired("sha256sum")
    world.hosts[0].unwrap("sha256sum")
    assert dropped, "the connection never dropped"
    assert "  drift: ssh-re1-service: the engine service is not running\n" in r.stdout, r.stdout
    assert f"  drift: ssh-re2-service: {edited} changed\n" in r.stdout and r.stdout.count("drift:") == 2
    world.project.pulumi("refresh", "--yes", "--stack", "two")  # as typed: the same reads, the same state
    assert world.outputs("two", "ssh-re1-service")["drift"] == ["the engine service is not running"]
    assert world.outputs("two", "ssh-re2-service")["drift"] == [f"{edited} changed"]
    assert world.outputs("two", "ssh-re1-weights")["drift"] == []
    r = world.project.inferry("up", "two")
    assert sorted(changes(r.stdout)) == [("updated", "ssh-re1-service"), ("updated", "ssh-re2-service")]
    assert world.hosts[1].path(edited).read_text() == svc2["files"][0]["content"]
    assert world.replica_status(0) == 200 and world.outputs("two", "ssh-re1-service")["drift"] == []
    assert changes(world.project.inferry("up", "two").stdout) == []


@pytest.mark.usefixtures("deployed")
def test_no_secret_in_state_or_stack_files(world):
    key_line = max(world.private_key.splitlines(), key=len)
    canaries = {"api key": API_KEY, "S3 access key": S3_KEYS[0], "S3 secret key": S3_KEYS[1], "SSH key": key_line}
    shown = world.project.pulumi("stack", "export", "--stack", "two", "--show-secrets").stdout
    assert all(c in shown for c in (API_KEY, S3_KEYS[1], key_line)), "the canaries are in state, encrypted"
    texts = {"stack export": world.project.pulumi("stack", "export", "--stack", "two").stdout}
    for folder in (world.project.state, world.project.folder / "stacks"):
        texts.update({str(p): p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file()})
    assert len(texts) > 3
    leaks = [(what, where) for where, text in texts.items() for what, c in canaries.items() if c in text]
    assert leaks == []
    service = world.project.resources("two")["ssh-re1-service"]
    for secret in ("private_key", "secret_values"):  # secret inputs are ciphertext in state
        assert set(service["inputs"][secret]) == {"4dabf18193072939515e22adb298388d", "ciphertext"}


@pytest.mark.usefixtures("deployed")
def test_host_down_mid_up_names_it_and_the_next_up_finishes_the_rest(world):
    world.project.set_deployment("two", world.deployment(max_num_seqs=32))
    world.hosts[1].stop_sshd()
    try:
        r = world.project.inferry("up", "two", check=False)
    finally:
        world.hosts[1].start_sshd()
    assert r.returncode == 1
    assert "host re2" in r.stderr and "ssh-re2-service" in r.stderr, r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    assert ("updated", "ssh-re1-service") in changes(r.stdout)  # done, and recorded in state
    assert "32" in world.hosts[0].engine_starts()[-1]["argv"] and "32" not in world.hosts[1].engine_starts()[-1]["argv"]
    first = ops_log(world.hosts[0])
    r = world.project.inferry("up", "two")
    assert changes(r.stdout) == [("updated", "ssh-re2-service")]
    assert ops_log(world.hosts[0]) == first and "32" in world.hosts[1].engine_starts()[-1]["argv"]


@pytest.mark.usefixtures("deployed")
def test_outputs_are_the_stacks(world):
    r = world.project.inferry("outputs", "two", "--json")
    assert f"http://{world.hosts[0].address}:8080/v1" in r.stdout
    plain = world.project.pulumi("stack", "output", "endpoint", "--stack", "two").stdout.strip()
    assert plain == f"http://{world.hosts[0].address}:8080/v1"


@pytest.mark.usefixtures("deployed")
def test_destroy_removes_in_dependency_order_and_again_is_a_noop(world):
    svc = world.outputs("two", "ssh-re1-service")
    model_dir = world.outputs("two", "ssh-re1-weights")["model_dir"]
    for h in world.hosts:  # what a real engine compiles into its cache (XDG_CACHE_HOME: the service folder's)
        h.exec(f"mkdir -p {svc['service_dir']}/cache/vllm/torch_compile_cache && echo k > "
               f"{svc['service_dir']}/cache/vllm/torch_compile_cache/graph", check=True)
    r = world.project.pulumi("destroy", "--yes", "--stack", "two")
    order = re.findall(r"(ssh-\S+|weights-bucket) deleted", r.stdout)
    assert order.index("ssh-gateway") < min(order.index(f"ssh-{h.name}-service") for h in world.hosts)
    assert max(order.index(f"ssh-{h.name}-service") for h in world.hosts) < min(
        order.index(f"ssh-{h.name}-weights") for h in world.hosts)
    assert max(order.index(f"ssh-{h.name}-weights") for h in world.hosts) < min(
        order.index(f"ssh-{h.name}-host") for h in world.hosts)
    for i, h in enumerate(world.hosts):
        assert world.replica_status(i) != 200
        assert not h.path(svc["service_dir"]).exists()
        assert not h.path(model_dir).exists()  # the weights too: the stack keeps nothing (target.keep_on_destroy)
    assert (world.server.root / BUCKET / PREFIX).is_dir()  # a bucket inferry did not create stays, with its objects
    assert world.project.resources("two") == {}
    again = world.project.pulumi("destroy", "--yes", "--stack", "two")
    assert not re.search(r"^\s+- \d+ deleted", again.stdout, re.M) and " deleted (" not in again.stdout


def test_infeasible_stack_fails_preview_with_the_plans_reason(world):
    d = copy.deepcopy(world.deployment())
    d["model"] = {"name": "llama-3.1-405b-instruct", "weights": f"s3://{BUCKET}/llama-3.1-405b-instruct"}
    world.project.write_stack("big", d, {"sshPrivateKey": world.private_key, "apiKey": API_KEY,
                                         "s3AccessKey": S3_KEYS[0], "s3SecretKey": S3_KEYS[1]})
    r = world.project.inferry("preview", "big", check=False)
    assert r.returncode == 1, r.stderr
    assert r.stderr.count("exceed the 125.91 GiB the engine may use on a H200") == 1, r.stderr
    assert "set engine.tensor_parallel_size: 8" in r.stderr  # the bullet's fix, as validate words it
    assert "Traceback" not in r.stdout + r.stderr
    assert world.project.resources("big") == {}
