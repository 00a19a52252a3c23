"""The gateway on the real node: `inferry up` puts Caddy pods (the real Caddy binary, tests/support/node_images.py)
in front of the engine's Service. What a client in the node's network sees through the gateway's Service, and
what the engine pod runs with, are read from the cluster, not from inferry's reports."""
from __future__ import annotations

import json

import pytest

from tests.support.pods import API_KEY, MODEL, NAME, SECRETS, on_the_node, pod_of, store  # noqa: F401
from tests.support.realengine import Project

pytestmark = [pytest.mark.cluster, pytest.mark.gateway]
NS = "pods-gw"


@pytest.fixture(scope="module")
def gw(node, cluster, store, tmp_path_factory, installed):
    """The vLLM stack behind one gateway pod, up; destroyed at the end whatever happened."""
    project = Project(tmp_path_factory.mktemp("gw") / "project", installed[1])
    d = on_the_node(cluster, store, NS)
    where = {k: d["target"][k] for k in ("node_selector", "tolerations")}  # the test's one node is tainted
    d["target"]["gateway"] = {"replicas": 1, **where}
    project.write_stack("gw", d, SECRETS)
    try:
        project.inferry("up", "gw", timeout=600)
    except Exception:  # what the cluster says, for the failure's report
        print(cluster.kubectl("get", "pods,svc,endpoints", "-n", NS, "-o", "wide", check=False).stdout)
        print(cluster.kubectl("describe", "pods", "-n", NS, "-l", "app.kubernetes.io/component=gateway",
                              check=False).stdout[-3000:])
        raise
    yield project
    project.pulumi("destroy", "--yes", "--stack", "gw", check=False, timeout=600)


def through(node, cluster, path: str, key: str | None, want: str, *curl: str) -> tuple[str, str]:
    """(status, body) of a request to the gateway's Service from the node's network."""
    ip = cluster.get("service", f"{NAME}-gateway", NS)["spec"]["clusterIP"]
    auth = ["-H", f"Authorization: Bearer {key}"] if key else []
    r = node.http(f"http://{ip}{path}", *auth, *curl, want=want, timeout=60)
    body, _, status = r.stdout.rpartition("\n")
    return status, body


def test_through_the_gateway_the_api_needs_a_key_and_every_other_path_is_refused(gw, node, cluster):
    chat = json.dumps({"model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
    status, body = through(node, cluster, "/v1/chat/completions", API_KEY, "200",
                           "-H", "Content-Type: application/json", "-d", chat)
    assert status == "200" and json.loads(body)["choices"], body
    assert through(node, cluster, "/v1/models", None, "401")[0] == "401"
    assert through(node, cluster, "/v1/models", "sk-pods-wrong-" + "0" * 20, "401")[0] == "401"
    for path in ("/metrics", "/docs", "/openapi.json", "/version", "/v1/models/../../metrics"):
        assert through(node, cluster, path, API_KEY, "404", "--path-as-is")[0] == "404", path
    status, body = through(node, cluster, "/health", None, "200")
    assert status == "200" and body == ""


def test_the_engine_pod_carries_no_client_key_and_only_the_gateway_may_reach_it(gw, cluster):
    pod = pod_of(cluster, NS)
    (engine,) = [c for c in pod["spec"]["containers"] if c["name"] == "engine"]
    assert not any(e["name"] == "VLLM_API_KEY" for e in engine.get("env", []))
    environ = cluster.kubectl("exec", "-n", NS, pod["metadata"]["name"], "-c", "engine", "--", "cat",
                              "/proc/1/environ").stdout
    assert API_KEY not in environ and "--api-key" not in cluster.kubectl(
        "exec", "-n", NS, pod["metadata"]["name"], "-c", "engine", "--", "cat", "/proc/1/cmdline").stdout
    # The policy the API server holds (enforced: the next test).
    policy = cluster.get("networkpolicy", NAME, NS)["spec"]
    assert policy["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "engine"
    (rule,) = policy["ingress"]
    assert rule["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "gateway"
    gateways = json.loads(cluster.kubectl("get", "pods", "-n", NS, "-l", "app.kubernetes.io/component=gateway",
                                          "-o", "json").stdout)["items"]
    assert gateways and all(p["status"]["phase"] == "Running" for p in gateways)
    c = gateways[0]["spec"]["containers"][0]
    assert c["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}
    # The binary carries the official image's file capability (which makes exec fail under drop ALL alone); the
    # running Caddy is not root and holds that one capability and nothing else, as the kernel reports it.
    name = gateways[0]["metadata"]["name"]
    probe = ("import os; print(os.getxattr('/usr/bin/caddy', 'security.capability').hex()); "
             "f = dict(l.split(':\\t', 1) for l in open('/proc/1/status') if ':\\t' in l); "
             "print(f['Uid'].split()[1], f['Gid'].split()[1], f['CapEff'].strip(), f['NoNewPrivs'].strip())")
    xattr, uid, gid, eff, nnp = cluster.kubectl("exec", "-n", NS, name, "--", "python3", "-c", probe).stdout.split()
    assert xattr.startswith("01000002") and int(xattr[8:16], 16) == 0x00040000, xattr  # +ep, bit 10 (LE)
    assert (uid, gid, int(eff, 16), nnp) == ("65532", "65532", 1 << 10, "1")
    # Pod Security "restricted" (non-root, no escalation, drop ALL, RuntimeDefault) admits the gateway's pod.
    cluster.kubectl("create", "namespace", "pods-gw-restricted", check=False)
    cluster.kubectl("label", "namespace", "pods-gw-restricted", "--overwrite",
                    "pod-security.kubernetes.io/enforce=restricted")
    try:
        template = cluster.get("deployment", f"{NAME}-gateway", NS)["spec"]["template"]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gateway", "namespace": "pods-gw-restricted"},
               "spec": {**template["spec"], "volumes": [{"name": v["name"], "emptyDir": {}}
                                                        for v in template["spec"]["volumes"]]}}
        admitted = cluster.apply(pod, extra=("--dry-run=server",))
        assert admitted.returncode == 0, admitted.stderr
        root = {**pod, "spec": {**pod["spec"], "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}}
        refused = cluster.apply(root, extra=("--dry-run=server",))  # the control: the same pod as root is not
        assert refused.returncode != 0 and "violates PodSecurity" in refused.stderr, refused.stderr
    finally:
        cluster.kubectl("delete", "namespace", "pods-gw-restricted", "--wait=false", check=False)


def test_the_node_enforcing_the_policy_lets_only_the_gateway_and_the_scraper_reach_the_engine(gw, node, cluster):
    """With a policy agent on the node (kube-router's policy controller, tests/support/netpol.py), a pod in another
    namespace reaches the gateway's Service but neither the engine pod nor its Service; a pod in the scraper's
    namespace reads the engine's metrics; the gateway still answers chats. Without the agent the same pod reaches
    the engine: the control that shows the refusal is the policy's doing."""
    from tests.support.netpol import enforcing, stranger

    pod = pod_of(cluster, NS)
    (engine,) = [c for c in pod["spec"]["containers"] if c["name"] == "engine"]
    port = engine["ports"][0]["containerPort"]
    direct = f"http://{pod['status']['podIP']}:{port}/health"
    service = f"http://{cluster.get('service', NAME, NS)['spec']['clusterIP']}:{port}/health"
    door = f"http://{cluster.get('service', f'{NAME}-gateway', NS)['spec']['clusterIP']}/health"
    metrics = f"http://{pod['status']['podIP']}:{port}/metrics"
    had_monitoring = cluster.kubectl("get", "namespace", "monitoring", check=False).returncode == 0
    try:
        assert stranger(cluster, "pods-gw-stranger", engine["image"], direct) == {direct: "200"}
        with enforcing(node, cluster):
            seen = stranger(cluster, "pods-gw-stranger", engine["image"], direct, service, door)
            assert seen[door] == "200" and seen[direct] != "200" and seen[service] != "200", seen
            assert stranger(cluster, "monitoring", engine["image"], metrics) == {metrics: "200"}
            chat = json.dumps({"model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
            assert through(node, cluster, "/v1/chat/completions", API_KEY, "200", "-H",
                           "Content-Type: application/json", "-d", chat)[0] == "200"
        rules = node.netns_exec("iptables-save", "-t", "filter").stdout
        assert "KUBE-ROUTER" not in rules and "KUBE-POD-FW" not in rules  # the node as before, for later tests
    finally:
        cluster.kubectl("delete", "namespace", "pods-gw-stranger", "--wait=false", check=False)
        if not had_monitoring:
            cluster.kubectl("delete", "namespace", "monitoring", "--wait=false", check=False)


def test_status_reads_the_engine_metrics_inside_the_cluster_while_the_gateway_refuses_them(gw, node, cluster):
    from types import SimpleNamespace

    from infra.lifecycle.status import replica_status
    from infra.stack.stackfile import load_stack
    from infra.targets.kubernetes.target import TARGET

    chat = json.dumps({"model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
    assert through(node, cluster, "/v1/chat/completions", API_KEY, "200", "-H", "Content-Type: application/json",
                   "-d", chat)[0] == "200"
    d = load_stack(str(gw.stack_file("gw"))).deployment
    (status,) = replica_status(TARGET.engine_metrics(SimpleNamespace(deployment=d), lambda ref, field: ""))
    pod = pod_of(cluster, NS)
    assert status.source == f"pod {pod['metadata']['name']}" and status.metrics is not None, status
    # The count the engine itself reports, read from inside its pod (not by inferry).
    text = cluster.kubectl("exec", "-n", NS, pod["metadata"]["name"], "-c", "engine", "--", "python3", "-c",
                           "import urllib.request as u; print(u.urlopen('http://127.0.0.1:8000/metrics').read()"
                           ".decode())").stdout
    count = next(float(line.split()[-1]) for line in text.splitlines()
                 if line.startswith("vllm:time_to_first_token_seconds_count"))
    assert count >= 1 and status.metrics.ttft_count == int(count)


def test_a_key_rotates_with_no_failed_request_and_no_engine_restart(gw, node, cluster, store):
    """Add the new key beside the old (gateway pods roll: one ready before the other goes), move the client,
    then drop the old one; a client polling through the gateway the whole time sees only 200s."""
    import threading
    import time

    new = "sk-pods-rotated-" + "5c" * 12
    engine = pod_of(cluster, NS)
    d = on_the_node(cluster, store, NS)
    d["target"]["gateway"] = {"replicas": 1, **{k: d["target"][k] for k in ("node_selector", "tolerations")}}
    d["serving"]["previous_api_key"] = {"config": "previousApiKey"}
    codes: list[tuple[str, str]] = []
    key = [API_KEY]
    stop = threading.Event()

    def poll() -> None:
        ip = cluster.get("service", f"{NAME}-gateway", NS)["spec"]["clusterIP"]
        while not stop.is_set():
            r = node.netns_exec("curl", "-sS", "-o", "/dev/null", "-m", "20", "-w", "%{http_code}", "-H",
                                f"Authorization: Bearer {key[0]}", f"http://{ip}/v1/models", check=False)
            codes.append((key[0][-4:], r.stdout if r.stdout == "200" else f"{r.stdout} {r.stderr.strip()} "
                          f"at {time.monotonic() - t0:.1f}s"))

    t0 = time.monotonic()
    t = threading.Thread(target=poll)
    t.start()
    try:
        gw.set_deployment("gw", d)
        gw.pulumi("config", "set", "--secret", "--stack", "gw", "inferry:previousApiKey", stdin=API_KEY)
        gw.pulumi("config", "set", "--secret", "--stack", "gw", "inferry:apiKey", stdin=new)
        r = gw.inferry("up", "gw", timeout=600)  # both keys accepted
        assert "gateway-rollout" in r.stdout or "updated" in r.stdout, r.stdout
        key[0] = new  # the client moves to the new key
        assert through(node, cluster, "/v1/models", API_KEY, "200")[0] == "200"
        del d["serving"]["previous_api_key"]
        gw.set_deployment("gw", d)
        gw.inferry("up", "gw", timeout=600)  # the old key is gone
    finally:
        stop.set()
        t.join()
    assert codes and all(code == "200" for _, code in codes), [c for c in codes if c[1] != "200"][:3]
    assert {k for k, _ in codes} == {API_KEY[-4:], new[-4:]}  # both keys were polled with
    assert through(node, cluster, "/v1/models", API_KEY, "401")[0] == "401"
    after = pod_of(cluster, NS)
    assert after["metadata"]["name"] == engine["metadata"]["name"]  # the engine was not restarted
    assert after["status"]["containerStatuses"][0]["restartCount"] == engine["status"]["containerStatuses"][0][
        "restartCount"]


def test_past_a_keys_limit_the_gateway_pod_answers_429_with_retry_after(gw, node, cluster, store):
    """inferry's Caddy build in the gateway image: a key's rate limit (6 a minute, a burst of 1) refuses its
    second request at once, with the wait until the next one is allowed."""
    d = on_the_node(cluster, store, NS)
    d["target"]["gateway"] = {"replicas": 1, **{k: d["target"][k] for k in ("node_selector", "tolerations")},
                              "limits": {"per_key_per_minute": 6}}
    gw.set_deployment("gw", d)
    gw.pulumi("config", "set", "--secret", "--stack", "gw", "inferry:apiKey", stdin=API_KEY)
    gw.inferry("up", "gw", timeout=600)
    ip = cluster.get("service", f"{NAME}-gateway", NS)["spec"]["clusterIP"]
    chat = json.dumps({"model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": "limited"}]})
    first = through(node, cluster, "/v1/chat/completions", API_KEY, "200", "-H", "Content-Type: application/json",
                    "-d", chat)
    assert first[0] == "200", first
    r = node.netns_exec("curl", "-sS", "-D", "-", "-o", "/dev/null", "-m", "20", "-H",
                        f"Authorization: Bearer {API_KEY}", "-H", "Content-Type: application/json", "-d", chat,
                        f"http://{ip}/v1/chat/completions", check=False)
    head = r.stdout.lower()
    assert head.startswith("http/1.1 429") and "retry-after: " in head, r.stdout
    assert 1 <= int(head.split("retry-after: ")[1].split()[0]) <= 10


def test_tensorrt_llm_serves_behind_the_gateway_and_its_pod_holds_no_key(node, cluster, store, tmp_path, installed):
    """trtllm-serve cannot check a key: behind the gateway its pod's nginx checks none (the gateway did) and the
    pod holds no key anywhere, yet a chat with the key is answered through the gateway and one without is not."""
    ns = "pods-gw-trt"
    d = on_the_node(cluster, store, ns)
    d["engine"] = {"kind": "tensorrt-llm", "max_model_len": 32768}
    d["target"]["gateway"] = {"replicas": 1, **{k: d["target"][k] for k in ("node_selector", "tolerations")}}
    project = Project(tmp_path / "project", installed[1])
    project.write_stack("trt", d, SECRETS)
    try:
        r = project.inferry("up", "trt", timeout=600, check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        ip = cluster.get("service", f"{NAME}-gateway", ns)["spec"]["clusterIP"]
        chat = json.dumps({"model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
        ok = node.http(f"http://{ip}/v1/chat/completions", "-H", f"Authorization: Bearer {API_KEY}", "-H",
                       "Content-Type: application/json", "-d", chat, want="200", timeout=60)
        assert ok.stdout.endswith("\n200") and json.loads(ok.stdout.rpartition("\n")[0])["choices"], ok.stdout
        refused = node.http(f"http://{ip}/v1/chat/completions", "-H", "Content-Type: application/json", "-d", chat,
                            want="401", timeout=30)
        assert refused.stdout.endswith("\n401")
        pod = pod_of(cluster, ns)
        for c in pod["spec"]["containers"]:  # what each container of the engine pod runs with, from the kernel
            environ = cluster.kubectl("exec", "-n", ns, pod["metadata"]["name"], "-c", c["name"], "--", "cat",
                                      "/proc/1/environ").stdout
            assert API_KEY not in environ, c["name"]
        conf = cluster.kubectl("exec", "-n", ns, pod["metadata"]["name"], "-c", "auth-proxy", "--", "cat",
                               "/etc/nginx/conf.d/default.conf").stdout
        assert "listen 8000;" in conf and API_KEY not in conf and "Authorization" not in conf, conf
    finally:
        project.pulumi("destroy", "--yes", "--stack", "trt", check=False, timeout=600)
