"""A user's first day, as a user has it: inferry installed from a wheel into a fresh venv, a folder of their own
outside any checkout, secrets set with the commands inferry prints (values on stdin), weights pushed to a real S3
server, two GPU hosts with the default docker runtime, the real Pulumi CLI and its Python language host.

One journey through `inferry` commands (with a typed `pulumi up` that must find nothing to change), one through
typed `pulumi` commands where they exist. Each runs alone; both end with nothing of inferry's left on the hosts
(the weights cache aside).
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from infra.lifecycle import probe
from tests.support.progharness import Poller
from tests.support.realengine import TOOLS_BIN
from tests.support.ssh_env import FILES, MODEL
from tests.targets.ssh.test_ssh_docker import container

pytestmark = [pytest.mark.real_engine, pytest.mark.docker]

API_KEY = "sk-journey-" + "5" * 24
KEYS = ("journey-access-key", "journey-secret-" + "6" * 16)
PASSPHRASE = "journey-passphrase-" + "7" * 8
IMAGE = "vllm/vllm-openai:v0.33.0"


class User:
    """One user's shell: their folder, their venv first on PATH (activated), their HOME; nothing of the suite's."""

    def __init__(self, folder: Path, bin_dir: Path):
        self.folder = folder
        folder.mkdir(parents=True)
        home = folder.parent / "home"
        (home / ".ssh").mkdir(parents=True)
        keep = {k: v for k, v in os.environ.items()
                if k in ("LANG", "LC_ALL", "TERM", "TMPDIR", "USER", "LOGNAME")}
        self.env = {**keep, "HOME": str(home), "VIRTUAL_ENV": str(bin_dir.parent),
                    "PATH": f"{bin_dir}:{TOOLS_BIN}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE, "PULUMI_SKIP_UPDATE_CHECK": "true",
                    "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true"}

    def sh(self, command: str, stdin: str | None = None, ok: bool = True) -> subprocess.CompletedProcess:
        """A command line as typed (so a printed fix runs exactly as printed)."""
        done = subprocess.run(["bash", "-c", command], cwd=self.folder, env=self.env, input=stdin,
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


@pytest.fixture(scope="module")
def hosts(host_network):
    """Two GPU hosts, each with its own Docker engine (shared by the journeys: each leaves them clean)."""
    found = host_network.add_hosts(["jy1", "jy2"], docker=True)
    for h in found:
        h.set_standin(startup_s=1.0)  # an engine restart is a window a client could see
    yield found
    for h in found:
        host_network.remove_host(h)


@pytest.fixture
def first_day(installed, hosts, host_network, s3_server_factory, tmp_path):
    """A user after `inferry init prod`, with a model folder and an empty S3 server (no bucket yet)."""
    _, bin_dir = installed
    user = User(tmp_path / "my-llm", bin_dir)
    assert not any((p / "Pulumi.yaml").exists() for p in (user.folder, *user.folder.parents))
    r = user.sh("inferry init prod --target ssh --engine vllm")
    assert "is now a Pulumi project" in r.stderr and (user.folder / "Pulumi.yaml").is_file()
    model = user.folder / "Llama-3.1-8B-Instruct"
    model.mkdir()
    for rel, data in FILES.items():
        (model / rel).write_bytes(data)
    server = s3_server_factory(*KEYS, host=host_network.gateway)
    user.edit(
        model={"name": MODEL, "weights": "llama-3.1-8b-instruct"},
        engine={"max_model_len": 4096},
        target={"kind": "ssh", "health_timeout_s": 60, "private_key": {"config": "sshPrivateKey"},
                "hosts": [{"address": h.address, "name": h.name, "host_key": h.host_key_line} for h in hosts]},
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


def serves(hosts) -> None:
    """Each host's engine answers chat with the key, 401 without it; containers run the pinned image."""
    for h in hosts:
        c = container(h)
        assert c and c["State"]["Running"] and c["Config"]["Image"] == IMAGE
        url = f"http://{h.address}:8000/v1"
        assert probe.chat_check(url, API_KEY, MODEL)
        assert probe.get(url + "/models", 3, None)[0] == 401


def rolls_one_host_at_a_time(user: User, hosts, command: str) -> None:
    """An engine option changed, applied with `command`: each engine restarts with it, never both at once."""
    user.edit(engine={"max_num_seqs": 64})
    before = [len(h.engine_starts()) for h in hosts]
    poller = Poller([(f"http://{h.address}:8000", API_KEY) for h in hosts])
    poller.start()
    user.sh(command)
    samples = poller.finish()
    new = [h.engine_starts()[n:] for h, n in zip(hosts, before)]
    assert [len(x) for x in new] == [1, 1] and all("64" in x[0]["argv"] for x in new), new
    assert samples and all(any(s) for s in samples), "both replicas were down at once"


def nothing_left(hosts) -> None:
    """No container, compose project, unit or config of inferry's on any host."""
    for h in hosts:
        assert container(h) == {}
        assert h.exec("docker ps -aq").stdout.split() == []
        assert h.exec("ls -A /etc/inferry 2>/dev/null").stdout == ""
        assert h.exec("pgrep -f '[v]llm serve' || true").stdout.strip() == ""


def test_first_day_with_inferry_commands(first_day, hosts):
    user, server = first_day
    set_secrets_as_printed(user)
    push_weights(user, server)
    r = user.sh("inferry up prod")
    assert "endpoint" in r.stdout and API_KEY not in r.stdout + r.stderr
    serves(hosts)
    status = user.sh("inferry status prod").stdout
    assert all(f"http://{h.address}:8000/v1  healthy" in status for h in hosts), status
    rolls_one_host_at_a_time(user, hosts, "inferry up prod")
    serves(hosts)
    # one program, one state: the typed CLI runs __main__.py through the language host and finds nothing to do
    typed = user.sh("pulumi up --yes --stack prod --expect-no-changes")
    assert re.search(r"\d+ unchanged", typed.stdout), typed.stdout
    user.sh("inferry refresh prod")
    user.sh("inferry destroy prod --yes")
    nothing_left(hosts)


def test_first_day_with_typed_pulumi_commands(first_day, hosts):
    user, server = first_day
    set_secrets_as_printed(user)
    push_weights(user, server)
    assert "create" in user.sh("pulumi preview --stack prod").stdout
    assert all(container(h) == {} for h in hosts)  # a preview creates nothing
    user.sh("pulumi up --yes --stack prod")
    serves(hosts)
    status = user.sh("inferry status prod").stdout
    assert all(f"http://{h.address}:8000/v1  healthy" in status for h in hosts), status
    rolls_one_host_at_a_time(user, hosts, "pulumi up --yes --stack prod")
    assert "unchanged" in user.sh("inferry up prod").stdout  # and back: inferry sees the typed update's state
    user.sh("pulumi refresh --yes --stack prod")
    user.sh("pulumi destroy --yes --stack prod")
    nothing_left(hosts)


def test_a_stack_validate_refuses_is_never_deployed(first_day, hosts):
    """The one gate, typed: `pulumi preview` of a stack with a flag vLLM rejects fails with validate's bullet."""
    user, _ = first_day
    set_secrets_as_printed(user)
    user.edit(engine={"extra_args": ["--swap-space=abc"]})
    bullet = next(ln for ln in user.sh("inferry validate prod", ok=False).stderr.splitlines() if "--swap-space" in ln)
    for command in ("pulumi preview --stack prod", "inferry up prod", "inferry render prod --out out"):
        r = user.sh(command, ok=False)
        assert r.returncode != 0 and bullet.strip(" •-") in r.stdout + r.stderr, command
    assert not (user.folder / "out").exists() and all(container(h) == {} for h in hosts)

