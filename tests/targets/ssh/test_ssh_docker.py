"""runtime: docker, the default, for real: each test host runs its own Docker engine (tests/support/hosts/docker.py)
and the rendered compose file runs unchanged on the stand-in engine image. What is checked is read from Docker
itself (`docker inspect`, `docker ps`), not from inferry's reports. The tests of the pair run in order.
"""
from __future__ import annotations

import json
import time

import pytest

from infra.errors import RemoteError
from infra.lifecycle import probe
from tests.support import ssh_direct as ssh_apply
from infra.targets.ssh.status import host_lines
from tests.support.ssh_env import (API_KEY, MODEL, apply, deployment, fresh_sessions, ops_log, plan_for,  # noqa: F401
                                   secrets, weights_store)

pytestmark = pytest.mark.docker  # every host here runs its own Docker engine
IMAGE = "vllm/vllm-openai:v0.33.0"


def container(host, service: str = "engine") -> dict:
    """`docker inspect` of the compose service's container on the host ({} when there is none)."""
    cid = host.exec(f"docker ps -aq --filter label=com.docker.compose.service={service}").stdout.split()
    if not cid:
        return {}
    return json.loads(host.exec(f"docker inspect {cid[0]}", check=True).stdout)[0]


def started(host) -> tuple[str, str]:
    """(container id, start time) of the host's engine."""
    c = container(host)
    return c["Id"], c["State"]["StartedAt"]


class Pair:
    """Two hosts with their own Docker engine, a plain-HTTP gateway on the first, the session's store (the test
    network stands for the private one: the second host's engine listens on its address there)."""

    def __init__(self, hosts, store):
        self.hosts, self.store = hosts, store

    def deployment(self, engine: dict | None = None, **target):
        d = deployment(self.hosts, self.store, engine=engine, runtime="docker",
                       gateway={"host": self.hosts[0].name, "tls": "off", "http_port": 8080}, **target)
        hosts = [d.target.hosts[0], d.target.hosts[1].model_copy(update={"private_address": self.hosts[1].address})]
        return d.model_copy(update={"target": d.target.model_copy(update={"hosts": hosts})})

    def apply(self, engine: dict | None = None, **target):
        return apply(self.deployment(engine, **target), self.hosts, self.store)


@pytest.fixture(scope="module")
def pair(host_network, weights_store):
    p = Pair(host_network.add_hosts(["dk1", "dk2"], docker=True), weights_store)
    for h in p.hosts:
        h.set_standin(startup_s=0.5)
    p.first = p.apply()
    yield p
    ssh_apply.destroy(plan_for(p.deployment()), secrets(p.hosts, weights_store))
    for h in p.hosts:
        host_network.remove_host(h)


def test_a_docker_host_gives_containers_its_gpus(pair):
    out = pair.hosts[0].exec(f"docker run --rm --gpus all {IMAGE} nvidia-smi -L", check=True).stdout
    assert out.startswith("GPU 0: NVIDIA H200")


def test_first_apply_runs_the_rendered_container(pair):
    spec = plan_for(pair.deployment()).hosts[0].service.spec
    for h, bind in zip(pair.hosts, ["127.0.0.1", pair.hosts[1].address]):
        c = container(h)
        assert c["Config"]["Image"] == IMAGE and c["State"]["Running"]
        assert [c["Path"], *c["Args"]] == ["vllm", "serve", *spec["args"]]
        assert not any(e.startswith("VLLM_API_KEY=") for e in c["Config"]["Env"])  # the gateway checks keys
        # published on one address only: loopback beside the gateway, the private address elsewhere
        assert c["HostConfig"]["PortBindings"] == {"8000/tcp": [{"HostIp": bind, "HostPort": "8000"}]}
        assert c["HostConfig"]["RestartPolicy"]["Name"] == "unless-stopped"
        # Its own IPC namespace with a sized /dev/shm (not the host's), as the kernel reports it.
        assert c["HostConfig"]["IpcMode"] in ("private", "shareable") and c["HostConfig"]["ShmSize"] == 16 << 30
        pid = c["State"]["Pid"]
        ns = h.exec(f"readlink /proc/{pid}/ns/ipc /proc/1/ns/ipc", check=True).stdout.split()
        assert ns[0] != ns[1], ns
        shm = h.exec(f"nsenter -t {pid} -m df -B1 --output=size /dev/shm | tail -1", check=True).stdout.strip()
        assert int(shm) == 16 << 30
        assert c["HostConfig"]["DeviceRequests"][0]["Driver"] == "nvidia"
        # Least privilege and nothing sent out, as Docker runs it (not as inferry rendered it).
        assert c["HostConfig"]["CapDrop"] == ["ALL"] and "no-new-privileges:true" in c["HostConfig"]["SecurityOpt"]
        assert {"VLLM_NO_USAGE_STATS=1", "DO_NOT_TRACK=1", "HF_HUB_DISABLE_TELEMETRY=1",
                "HF_HUB_OFFLINE=1"} <= set(c["Config"]["Env"])
        (weights,) = [m for m in c["Mounts"] if m["Source"].startswith("/var/lib/inferry/weights")]
        assert weights["RW"] is False
    gw = f"http://{pair.hosts[0].address}:8080/v1"
    assert pair.first.endpoint == gw and probe.chat_check(gw, API_KEY, MODEL)
    assert probe.get(f"{gw}/models", 3, None)[0] == 401
    assert probe.get(f"http://{pair.hosts[0].address}:8000/v1/models", 3, None)[0] == 0  # loopback only


def test_second_apply_keeps_the_same_containers(pair):
    before = [(started(h), ops_log(h)) for h in pair.hosts]
    again = pair.apply()
    assert again.count("writes") == 0 and again.count("restarts") == 0
    assert [(started(h), ops_log(h)) for h in pair.hosts] == before


def test_an_engine_option_recreates_the_containers_one_host_at_a_time(pair):
    before = [started(h) for h in pair.hosts]
    pair.apply({"max_num_seqs": 64})
    after = [container(h) for h in pair.hosts]
    assert all(a["Id"] != b[0] for a, b in zip(after, before))
    assert all("64" in a["Args"] for a in after)
    first, second = (a["State"]["StartedAt"] for a in after)
    assert second > first  # rolling: the second host's container started after the first one's


def test_a_bad_option_is_rolled_back_to_the_previous_container(pair):
    h = pair.hosts[0]
    good = container(h)["Args"]
    with pytest.raises(RemoteError) as e:  # the stand-in refuses it as vLLM's parser does: the engine exits
        pair.apply({"max_num_seqs": 64, "extra_args": ["--no-such-flag"]}, health_timeout_s=5)
    text = e.value.render()
    assert f"host {h.name}: the engine did not become healthy within 5s" in text
    assert "vllm serve: error: unknown option --no-such-flag" in text, text
    assert "the previous configuration was restored and is serving again" in text
    assert container(h)["Args"] == good and container(h)["State"]["Running"]
    assert h.exec("curl -fsS -m 3 -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/health").stdout == "200"
    assert "--no-such-flag" not in container(pair.hosts[1])["Args"]  # the rolling update stopped at the first


def test_a_crashed_engine_is_brought_back_by_docker(pair):
    h = pair.hosts[1]
    c = container(h)
    h.exec(f"kill -KILL {c['State']['Pid']}", check=True)  # the engine process dies, as on an engine crash
    deadline = time.monotonic() + 30
    while not (container(h)["RestartCount"] >= 1 and probe.healthy(f"http://{h.address}:8000/v1")):
        assert time.monotonic() < deadline, container(h)["State"]
        time.sleep(0.2)
    assert container(h)["Id"] == c["Id"]  # the same container, restarted by Docker's restart policy
    lines = host_lines(pair.deployment(), secrets(pair.hosts, pair.store)["target.private_key"])
    assert lines[1].startswith(f"host {h.name}: engine running since ") and lines[1].endswith(
        "restarted 1 time since the last apply"), lines
    assert lines[0].endswith("restarted 0 times since the last apply"), lines


def test_a_missing_image_changes_nothing(pair):
    before = [(started(h), h.exec("cat /etc/inferry/compose.yaml").stdout) for h in pair.hosts]
    with pytest.raises(RemoteError) as e:
        pair.apply({"max_num_seqs": 64, "image": "registry.invalid/vllm-openai:nope"})
    text = e.value.render()
    assert "image registry.invalid/vllm-openai:nope (engine.image) is not on the host and could not be pulled" in text
    assert "nothing was changed on the host" in text and "docker load" in text
    assert [(started(h), h.exec("cat /etc/inferry/compose.yaml").stdout) for h in pair.hosts] == before


def test_destroy_leaves_nothing_but_what_the_stack_keeps(pair, host_network):
    extra = host_network.add_host("dk3", docker=True)
    model = "/var/lib/inferry/weights/llama-3.1-8b-instruct"
    try:
        kept = deployment([extra], pair.store, runtime="docker", keep_on_destroy=["weights"])
        apply(kept, [extra], pair.store)
        assert container(extra)["State"]["Running"]
        ssh_apply.destroy(plan_for(kept), secrets([extra], pair.store))
        assert container(extra) == {} and extra.exec("ls -A /etc/inferry 2>/dev/null").stdout == ""
        assert extra.exec(f"ls {model}").stdout.strip()  # kept on purpose
        d = deployment([extra], pair.store, runtime="docker")  # the default: leaving a provider leaves nothing
        assert apply(d, [extra], pair.store).hosts[0].outputs["weights"]["fetched"] == 0  # the kept cache serves
        ssh_apply.destroy(plan_for(d), secrets([extra], pair.store))
        assert container(extra) == {} and extra.exec("ls -A /etc/inferry 2>/dev/null").stdout == ""
        # Read off the host's disk: no model folder, and no empty cache folder above it either.
        assert extra.exec(f"test -e {model} || echo gone").stdout == "gone\n"
        assert extra.exec("find /var/lib/inferry -mindepth 1 -not -path '/var/lib/inferry/weights' "
                          "2>/dev/null").stdout == ""
        assert extra.exec("docker images -q " + IMAGE).stdout.strip()  # the image stays (a public one)
    finally:
        host_network.remove_host(extra)


def test_tensorrt_llm_serves_behind_its_auth_proxy(host_network, weights_store):
    (h,) = host_network.add_hosts(["dkt"], docker=True)
    try:
        d = deployment([h], weights_store, engine={"kind": "tensorrt-llm"}, runtime="docker")
        out = apply(d, [h], weights_store)
        proxy = container(h, "auth-proxy")
        assert proxy["Config"]["Image"] == "nginx:1.27-alpine" and proxy["HostConfig"]["NetworkMode"] == "host"
        assert "no-new-privileges:true" in proxy["HostConfig"]["SecurityOpt"]
        engine = container(h)
        assert engine["Path"] == "trtllm-serve" and engine["HostConfig"]["CapDrop"] == ["ALL"]
        assert {"TRTLLM_NO_USAGE_STATS=1", "TELEMETRY_DISABLED=1", "DO_NOT_TRACK=1"} <= set(engine["Config"]["Env"])
        assert probe.chat_check(out.endpoint, API_KEY, MODEL)
        assert probe.get(out.endpoint + "/models", 3, None)[0] == 401
        assert probe.get(out.endpoint + "/models", 3, "sk-wrong")[0] == 401
    finally:
        host_network.remove_host(h)


def test_sglang_starts_in_its_container_and_status_reads_its_metrics(host_network, weights_store):
    # The rendered launch wrapper runs in the container; the stand-in merges its key file with SGLang's own
    # --config merger, which refuses any name not ending in .yaml (every start failed so before).
    from infra.lifecycle.status import endpoint_status

    (h,) = host_network.add_hosts(["dks"], docker=True)
    try:
        d = deployment([h], weights_store, engine={"kind": "sglang"}, runtime="docker")
        out = apply(d, [h], weights_store)
        c = container(h)
        assert c["Path"] == "sh" and "--enable-metrics" in c["Args"] and "--api-key" not in c["Args"]
        assert API_KEY not in json.dumps(c["Config"]["Cmd"])
        assert probe.chat_check(out.endpoint, API_KEY, MODEL)
        assert probe.get(out.endpoint + "/models", 3, "sk-wrong")[0] == 401
        status = endpoint_status(out.endpoint, api_key=API_KEY)
        assert status.healthy and status.metrics is not None, status
        assert status.metrics.ttft_count >= 1 and status.metrics.kv_cache_usage is not None
        text = probe.get(probe.base_url(out.endpoint) + "/metrics", 3, None)[1]
        assert "sglang:num_queue_reqs" in text and "vllm:" not in text  # read under SGLang's own names
        # The key reached SGLang through a named pipe: no file in the container holds it, nothing is left in /tmp.
        found = h.exec(f"docker exec -e K={API_KEY} {c['Id']} sh -c 'ls -A /tmp; "
                       "grep -rlsF -e \"$K\" /tmp /etc /root; true'")
        assert found.stdout == "", found.stdout
    finally:
        host_network.remove_host(h)


def test_preflight_names_what_docker_lacks(host_network, weights_store):
    (h,) = host_network.add_hosts(["dkp"], docker=True)
    try:
        d = deployment([h], weights_store, runtime="docker")
        h.exec("rm /usr/local/bin/nvidia-container-runtime-hook /usr/local/lib/docker/cli-plugins/docker-compose; "
               "kill $(cat /run/dockerd.pid)", check=True)
        deadline = time.monotonic() + 20
        while h.exec("docker version").returncode == 0:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        with pytest.raises(RemoteError) as e:
            apply(d, [h], weights_store)
        text = e.value.render()
        assert f"host {h.name}: preflight failed" in text
        assert "the Docker daemon does not answer (Cannot connect to the Docker daemon" in text
        assert "Docker Compose v2 (`docker compose`) is missing" in text
        assert "Docker cannot give containers GPUs: the NVIDIA Container Toolkit" in text
        assert h.exec("ls -A /etc/inferry 2>/dev/null").stdout == ""
    finally:
        host_network.remove_host(h)
