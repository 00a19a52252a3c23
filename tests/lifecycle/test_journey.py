"""A user's first day, as a user has it: inferry installed from a wheel into a fresh venv, a folder of their own
outside any checkout, secrets set with the commands inferry prints (values on stdin), weights pushed to a real S3
server, two GPU hosts with the default docker runtime, the real Pulumi CLI and its Python language host. The
endpoint is HTTPS through the gateway `inferry init` writes, its certificate issued over HTTP-01 by a real ACME
server (Pebble); the user's machine has a DNS record for the stack's domain and trusts Pebble's root, as a user of
a private CA would, and every request a test makes goes from there through that one door.

One journey through `inferry` commands (with a typed `pulumi up` that must find nothing to change), one through
typed `pulumi` commands where they exist. Each runs alone; both end with nothing of inferry's left on the hosts
(the weights cache aside).
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.acme import start_acme
from tests.support.realengine import TOOLS_BIN
from tests.support.ssh_env import FILES, MODEL
from tests.targets.ssh.test_ssh_docker import container

pytestmark = [pytest.mark.real_engine, pytest.mark.docker, pytest.mark.gateway, pytest.mark.acme]

API_KEY = "sk-journey-9f2c4e7a1b6d30c58e4f2a9d7b1c6e03"
DOMAIN = "llm.inferry.test"
ENDPOINT = f"https://{DOMAIN}/v1"
KEYS = ("journey-access-key", "journey-secret-" + "6" * 16)
PASSPHRASE = "journey-passphrase-" + "7" * 8
IMAGE = "vllm/vllm-openai:v0.33.0"


class User:
    """One user's shell: their folder, their venv first on PATH (activated), their HOME; nothing of the suite's."""

    def __init__(self, folder: Path, bin_dir: Path, dns: str, ca: str):
        self.folder = folder
        folder.mkdir(parents=True)
        home = folder.parent / "home"
        # The user's machine: /etc/hosts with the stack's DNS record (a mount namespace of its own: this machine's
        # file is untouched), and the private CA's root trusted by its clients (Python's ssl reads SSL_CERT_FILE).
        self.hosts_file, self.ca = folder.parent / "etc-hosts", folder.parent / "ca.pem"
        self.hosts_file.write_text(Path("/etc/hosts").read_text() + f"\n{dns} {DOMAIN}\n")
        self.ca.write_text(ca)
        (home / ".ssh").mkdir(parents=True)
        keep = {k: v for k, v in os.environ.items()
                if k in ("LANG", "LC_ALL", "TERM", "TMPDIR", "USER", "LOGNAME")}
        self.env = {**keep, "HOME": str(home), "VIRTUAL_ENV": str(bin_dir.parent),
                    "PATH": f"{bin_dir}:{TOOLS_BIN}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE, "PULUMI_SKIP_UPDATE_CHECK": "true",
                    "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true", "SSL_CERT_FILE": str(self.ca)}

    def argv(self, command: str) -> list[str]:
        """COMMAND in a shell on the user's machine."""
        return ["unshare", "--mount", "--propagation", "private", "bash", "-c",
                f"mount --bind {shlex.quote(str(self.hosts_file))} /etc/hosts && exec bash -c {shlex.quote(command)}"]

    def sh(self, command: str, stdin: str | None = None, ok: bool = True) -> subprocess.CompletedProcess:
        """A command line as typed (so a printed fix runs exactly as printed)."""
        done = subprocess.run(self.argv(command), cwd=self.folder, env=self.env, input=stdin,
                              capture_output=True, text=True, timeout=600)
        assert "Traceback" not in done.stdout + done.stderr, done.stderr
        if ok:
            assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done

    def stack_file(self) -> Path:
        return self.folder / "stacks" / "Pulumi.prod.yaml"

    def edit(self, **sections) -> None:
        """Edit the stack file's deployment as a user does (other config keys, e.g. the salt, stay)."""
        doc = yaml.safe_load(self.stack_file().read_text())
        d = doc["config"]["inferry:deployment"]
        for name, value in sections.items():
            if value is None:
                d.pop(name, None)
            else:
                d[name] = {**d.get(name, {}), **value} if name == "engine" else value
        self.stack_file().write_text(yaml.safe_dump(doc, sort_keys=False))

    def curl(self, path: str, key: str | None = API_KEY, data: str | None = None) -> str:
        """The status of one request through the gateway, the chain verified against the CA's root."""
        auth = f"-H {shlex.quote('Authorization: Bearer ' + key)}" if key else ""
        body = f"-H 'Content-Type: application/json' -d {shlex.quote(data)}" if data else ""
        return self.sh(f"curl -sS --path-as-is -o /dev/null -m 20 -w '%{{http_code}}' {auth} {body} "
                       f"{ENDPOINT}{path}").stdout


@pytest.fixture(scope="module")
def hosts(host_network, tmp_path_factory):
    """Two GPU hosts, each with its own Docker engine, and Pebble issuing for the first (shared by the journeys:
    each leaves the hosts clean)."""
    found = host_network.add_hosts(["jy1", "jy2"], docker=True)
    for h in found:
        h.set_standin(startup_s=1.0)  # an engine restart is a window a client could see
    acme = start_acme(tmp_path_factory.mktemp("acme"), host_network.gateway, found[0].address)
    found[0].exec(f"echo '{host_network.gateway} pebble' >> /etc/hosts", check=True)  # the CA's own name
    yield found, acme
    acme.stop()
    for h in found:
        host_network.remove_host(h)


@pytest.fixture
def first_day(installed, hosts, host_network, s3_server_factory, tmp_path):
    """A user after `inferry init prod`, with a model folder and an empty S3 server (no bucket yet)."""
    _, bin_dir = installed
    hosts, acme = hosts
    user = User(tmp_path / "my-llm", bin_dir, hosts[0].address, acme.root_pem())
    assert not any((p / "Pulumi.yaml").exists() for p in (user.folder, *user.folder.parents))
    r = user.sh("inferry init prod --target ssh --engine vllm")
    assert "is now a Pulumi project" in r.stderr and (user.folder / "Pulumi.yaml").is_file()
    written = yaml.safe_load(user.stack_file().read_text())["config"]["inferry:deployment"]["target"]
    assert written["gateway"]["domains"] and "tls" not in written["gateway"]  # HTTPS from ACME unless told
    model = user.folder / "Llama-3.1-8B-Instruct"
    model.mkdir()
    for rel, data in FILES.items():
        (model / rel).write_bytes(data)
    server = s3_server_factory(*KEYS, host=host_network.gateway)
    user.edit(
        model={"name": MODEL, "weights": "llama-3.1-8b-instruct"},
        engine={"max_model_len": 4096},
        target={"kind": "ssh", "health_timeout_s": 60, "private_key": {"config": "sshPrivateKey"},
                "hosts": [{"address": h.address, "name": h.name, "host_key": h.host_key_line,
                           **({"private_address": h.address} if i else {})} for i, h in enumerate(hosts)],
                "gateway": {"domains": [DOMAIN], "acme": {"directory": acme.directory,
                                                          "ca_root": str(acme.directory_root)}}},
        storage={"endpoint": server.endpoint, "region": server.region, "bucket": "my-weights",
                 "access_key_id": {"config": "s3AccessKey"}, "secret_access_key": {"config": "s3SecretKey"}},
        provider={"name": "test-cloud", "region": "eu-test", "gpu": "H200", "price_per_gpu_hour": 3.0},
        serving={"port": 8000, "api_key": {"config": "apiKey"}},
        policy=None)  # the starter's EU residency: the test store's region is us-east-1
    (Path(user.env["HOME"]) / ".ssh" / "id_ed25519").write_text(host_network.client_key_text)
    yield user, server
    user.sh("pulumi destroy --yes --stack prod", ok=False)  # a journey that failed half-way leaves no engine


def set_secrets_as_printed(user: User) -> None:
    """Run the fixes `inferry validate` prints for the unset secrets, exactly as printed, values on stdin."""
    r = user.sh("inferry validate prod", ok=False)
    assert r.returncode == 1
    fixes = re.findall(r"`(pulumi config set --secret --stack prod inferry:(\w+)[^`]*)`", r.stderr)
    assert {key for _, key in fixes} == {"apiKey", "s3AccessKey", "s3SecretKey", "sshPrivateKey"}, r.stderr
    assert "`pulumi stack init prod`" in r.stderr
    user.sh("pulumi stack init prod")
    values = {"apiKey": API_KEY, "s3AccessKey": KEYS[0], "s3SecretKey": KEYS[1]}
    for command, key in fixes:
        user.sh(command, stdin=values.get(key))  # sshPrivateKey's fix reads ~/.ssh/id_ed25519 itself
    assert user.sh("inferry validate prod").stdout.startswith("OK")
    text = user.stack_file().read_text()
    assert not any(secret in text for secret in (API_KEY, *KEYS)) and "encryptionsalt" in text


def push_weights(user: User, server) -> None:
    user.sh("inferry weights push ./Llama-3.1-8B-Instruct --stack prod --create-bucket")
    stored = server.root / "my-weights" / "llama-3.1-8b-instruct"
    assert all((stored / rel).read_bytes() == data for rel, data in FILES.items())


CHAT = '{"model": "%s", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}' % MODEL


def serves(user: User, hosts) -> None:
    """Through the gateway over HTTPS: chat with the key, 401 without it, 404 for the engine's metrics; each
    host's container runs the pinned image and answers the gateway alone (the engine port refused from the user's
    machine on the gateway's host, bound to the private address on the other)."""
    for h in hosts:
        c = container(h)
        assert c and c["State"]["Running"] and c["Config"]["Image"] == IMAGE
    assert user.curl("/chat/completions", data=CHAT) == "200"
    assert (user.curl("/models", key=None), user.curl("/../metrics")) == ("401", "404")
    assert user.sh(f"curl -s -m 5 http://{hosts[0].address}:8000/health", ok=False).returncode == 7  # refused
    listening = hosts[1].exec("ss -Hltn").stdout
    assert f"{hosts[1].address}:8000" in listening and "0.0.0.0:8000" not in listening, listening


def rolls_one_host_at_a_time(user: User, hosts, command: str) -> None:
    """An engine option changed, applied with `command`: each engine restarts with it, one at a time, and a
    client chatting through the gateway all along sees only 200s."""
    user.edit(engine={"max_num_seqs": 64})
    before = [len(h.engine_starts()) for h in hosts]
    codes, stop = user.folder.parent / "codes", user.folder.parent / "stop"
    client = subprocess.Popen(user.argv(
        f"while [ ! -e {stop} ]; do curl -s -o /dev/null -m 30 -w '%{{http_code}}\\n' -H 'Authorization: Bearer "
        f"{API_KEY}' -H 'Content-Type: application/json' -d {shlex.quote(CHAT)} {ENDPOINT}/chat/completions "
        f">> {codes}; done"), env=user.env)
    try:
        user.sh(command)
    finally:
        stop.touch()
        client.wait(60)
    new = [h.engine_starts()[n:] for h, n in zip(hosts, before)]
    assert [len(x) for x in new] == [1, 1] and all("64" in x[0]["argv"] for x in new), new
    seen = codes.read_text().split()
    assert len(seen) > 5 and set(seen) == {"200"}, seen
    stop.unlink()
    codes.unlink()


def nothing_left(hosts) -> None:
    """No container, compose project, unit or config of inferry's on any host."""
    for h in hosts:
        assert container(h) == {}
        assert h.exec("docker ps -aq").stdout.split() == []
        assert h.exec("ls -A /etc/inferry 2>/dev/null").stdout == ""
        assert h.exec("pgrep -f '[v]llm serve' || true").stdout.strip() == ""
        assert h.exec("pgrep -x caddy || true").stdout.strip() == ""


def test_first_day_with_inferry_commands(first_day, hosts):
    user, server = first_day
    hosts, _ = hosts
    set_secrets_as_printed(user)
    push_weights(user, server)
    r = user.sh("inferry up prod")
    assert ENDPOINT in r.stdout and API_KEY not in r.stdout + r.stderr
    serves(user, hosts)
    status = user.sh("inferry status prod").stdout
    assert f"{ENDPOINT}  healthy" in status, status
    rolls_one_host_at_a_time(user, hosts, "inferry up prod")
    serves(user, hosts)
    # one program, one state: the typed CLI runs __main__.py through the language host and finds nothing to do
    typed = user.sh("pulumi up --yes --stack prod --expect-no-changes")
    assert re.search(r"\d+ unchanged", typed.stdout), typed.stdout
    user.sh("inferry refresh prod")
    user.sh("inferry destroy prod --yes")
    nothing_left(hosts)


def test_first_day_with_typed_pulumi_commands(first_day, hosts):
    user, server = first_day
    hosts, _ = hosts
    set_secrets_as_printed(user)
    push_weights(user, server)
    assert "create" in user.sh("pulumi preview --stack prod").stdout
    assert all(container(h) == {} for h in hosts)  # a preview creates nothing
    user.sh("pulumi up --yes --stack prod")
    serves(user, hosts)
    status = user.sh("inferry status prod").stdout
    assert f"{ENDPOINT}  healthy" in status, status
    rolls_one_host_at_a_time(user, hosts, "pulumi up --yes --stack prod")
    assert "unchanged" in user.sh("inferry up prod").stdout  # and back: inferry sees the typed update's state
    user.sh("pulumi refresh --yes --stack prod")
    user.sh("pulumi destroy --yes --stack prod")
    nothing_left(hosts)


def test_a_stack_validate_refuses_is_never_deployed(first_day, hosts):
    """The one gate, typed: `pulumi preview` of a stack with a flag vLLM rejects fails with validate's bullet."""
    user, _ = first_day
    hosts, _ = hosts
    set_secrets_as_printed(user)
    user.edit(engine={"extra_args": ["--swap-space=abc"]})
    bullet = next(ln for ln in user.sh("inferry validate prod", ok=False).stderr.splitlines() if "--swap-space" in ln)
    for command in ("pulumi preview --stack prod", "inferry up prod", "inferry render prod --out out"):
        r = user.sh(command, ok=False)
        assert r.returncode != 0 and bullet.strip(" •-") in r.stdout + r.stderr, command
    assert not (user.folder / "out").exists() and all(container(h) == {} for h in hosts)

