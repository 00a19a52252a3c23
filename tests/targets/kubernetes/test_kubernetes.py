"""The Kubernetes target under Pulumi mocks: every object of every option combination is schema-valid.

Mocks, because the combinations are many (hundreds of programs) and need no cluster; the real engine and API
server deploy the main ones in tests/targets/kubernetes/test_cluster_kubernetes.py."""
from __future__ import annotations

import json
import secrets as secrets_module

import jsonschema
import kubernetes_validate
import pulumi
import pytest

from infra.errors import InferryError
from infra.targets.kubernetes.component import KubernetesTarget
from infra.targets.contract import TargetArgs
from infra.targets.kubernetes.manifests import objects
from tests.support.harness import SECRET_SIG, run
from tests.support.kubernetes_schema import validate
from tests.support.kubernetes_stacks import CASES, deployment, spec_of

KINDS = {
    "bundled": {"Namespace", "Secret", "ConfigMap", "Deployment", "Service", "NetworkPolicy", "ScaledObject",
                "ServiceMonitor"},
    "pvc-hpa-pdb-monitor": {"Namespace", "Secret", "ConfigMap", "PersistentVolumeClaim", "Deployment", "Service",
                            "NetworkPolicy", "PodDisruptionBudget", "HorizontalPodAutoscaler", "ServiceMonitor"},
    "stream-fixed-replicas": {"Namespace", "Secret", "ConfigMap", "Deployment", "Service"},
    "scale-to-zero-ingress": {"Namespace", "Secret", "ConfigMap", "Deployment", "Service", "Ingress",
                              "NetworkPolicy", "ScaledObject", "ServiceMonitor"},
    "trtllm-build-tp2": {"Namespace", "Secret", "ConfigMap", "Job", "Deployment", "Service", "PodDisruptionBudget",
                         "ScaledObject", "ServiceMonitor"},
    "trtllm-gateway": {"Namespace", "Secret", "ConfigMap", "Deployment", "Service", "NetworkPolicy"},
    "node-cache-draft": {"Namespace", "Secret", "ConfigMap", "PersistentVolume", "PersistentVolumeClaim",
                         "Deployment", "Service", "NetworkPolicy", "ScaledObject", "ServiceMonitor"},
    "existing-namespace-no-ingress-tls": {"Secret", "ConfigMap", "Deployment", "Service", "Ingress", "ScaledObject",
                                          "ServiceMonitor"},
}


@pytest.fixture(scope="module")
def rendered():
    """case -> manifests, built once per module (the component under mocks)."""
    return {case: objects(deployment(case), spec_of(deployment(case)), "test") for case in CASES}


def by_kind(manifests, kind):
    return [m for m in manifests if m["kind"] == kind]


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_object_is_schema_valid(rendered, case):
    manifests = rendered[case]
    assert {m["kind"] for m in manifests} == KINDS[case]
    for m in manifests:
        validate(m)


@pytest.mark.parametrize("case", sorted(CASES))
def test_engine_pod_has_gpus_shm_and_probes_sized_for_loading(rendered, case):
    d = deployment(case)
    spec = spec_of(d)
    pod = by_kind(rendered[case], "Deployment")[0]["spec"]["template"]["spec"]
    engine = pod["containers"][0]
    assert engine["resources"]["limits"]["nvidia.com/gpu"] == str(spec.gpus) == str(d.engine.gpus)
    shm = next(v for v in pod["volumes"] if v["name"] == "shm")
    assert shm["emptyDir"]["medium"] == "Memory" and shm["emptyDir"]["sizeLimit"].endswith("Gi")
    startup = engine["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= d.target.startup_timeout_s
    assert engine["readinessProbe"]["httpGet"]["path"] == spec.health_path
    assert (engine["image"], engine["command"] + engine["args"]) == (spec.image, list(spec.argv))


def test_tensor_parallel_gpus_and_build_job_fetch_then_build_then_upload(rendered):
    manifests = rendered["trtllm-build-tp2"]
    job = by_kind(manifests, "Job")[0]["spec"]["template"]["spec"]
    assert [c["name"] for c in job["initContainers"]] == ["fetch-weights", "verify-weights", "build-engine"]
    assert job["initContainers"][2]["resources"]["limits"]["nvidia.com/gpu"] == "2"
    upload = job["containers"][0]
    env = {e["name"]: e.get("value") for e in upload["env"]}
    assert env["BUILD_PREFIX"] == spec_of(deployment("trtllm-build-tp2")).build.cache_key
    serve_fetch = by_kind(manifests, "Deployment")[0]["spec"]["template"]["spec"]["initContainers"][0]
    assert {e["name"]: e.get("value") for e in serve_fetch["env"]}["BUILD_PREFIX"] == env["BUILD_PREFIX"]
    spec = spec_of(deployment("trtllm-build-tp2"))
    config = by_kind(manifests, "ConfigMap")[0]["data"]
    assert spec.files and all(config[f.name] == f.content for f in spec.files)
    mounts = by_kind(manifests, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert {(m["mountPath"], m.get("subPath")) for m in mounts} >= {(f.mount_path, f.name) for f in spec.files}
    names = [m["kind"] for m in manifests]
    assert names.index("Job") < names.index("Deployment")  # render order = apply order


def test_engine_without_key_check_gets_the_auth_proxy_in_front(rendered):
    manifests = rendered["trtllm-build-tp2"]
    spec = spec_of(deployment("trtllm-build-tp2"))
    assert spec.needs_auth_proxy and spec.listen_port != spec.port
    engine, proxy = by_kind(manifests, "Deployment")[0]["spec"]["template"]["spec"]["containers"]
    assert engine["ports"] == [{"name": "engine", "containerPort": spec.listen_port, "protocol": "TCP"}]
    # The engine binds 127.0.0.1: probe via the proxy, by number (a named port is looked up in the engine's own)
    assert {engine[p]["httpGet"]["port"] for p in ("startupProbe", "readinessProbe", "livenessProbe")} == {spec.port}
    assert proxy["ports"][0]["containerPort"] == spec.port and proxy["ports"][0]["name"] == "http"
    key = next(e for e in proxy["env"] if e["name"] == "INFERRY_API_KEY")
    assert key["valueFrom"]["secretKeyRef"]["key"] == "serving.api_key"
    assert "Bearer ${INFERRY_API_KEY}" in by_kind(manifests, "ConfigMap")[0]["data"]["auth-proxy.conf.template"]
    assert len(by_kind(rendered["bundled"], "Deployment")[0]["spec"]["template"]["spec"]["containers"]) == 1


def test_gpu_product_affinity_tolerations_and_labels(rendered):
    pod = by_kind(rendered["bundled"], "Deployment")[0]["spec"]["template"]["spec"]
    term = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert term["matchExpressions"][0] == {"key": "nvidia.com/gpu.product", "operator": "In",
                                           "values": ["NVIDIA-H100-80GB-HBM3"]}
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    other = by_kind(rendered["existing-namespace-no-ingress-tls"], "Deployment")[0]
    assert other["metadata"]["namespace"] == "ml-serving" and other["metadata"]["labels"]["team"] == "ml-platform"
    assert other["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "h100"}


def test_draft_weights_are_fetched_and_verified_too(rendered):
    spec = spec_of(deployment("pvc-hpa-pdb-monitor"))
    (source, path), = spec.extra_weights
    init = by_kind(rendered["pvc-hpa-pdb-monitor"], "Deployment")[0]["spec"]["template"]["spec"]["initContainers"]
    assert [c["name"] for c in init] == ["fetch-weights", "verify-weights", "fetch-extra-0", "verify-extra-0"]
    env = {e["name"]: e.get("value") for e in init[2]["env"]}
    assert f"s3://{env['BUCKET']}/{env['PREFIX']}" == source and env["WEIGHTS_DIR"] == path
    assert {e["name"]: e.get("value") for e in init[3]["env"]}["WEIGHTS_DIR"] == path


def test_node_cache_is_a_local_volume_on_the_engines_nodes_read_only_to_the_engine(rendered):
    """Each node keeps its copy in node_cache_path; the pods' model folders are links into it."""
    (pv,) = by_kind(rendered["node-cache-draft"], "PersistentVolume")
    (pvc,) = by_kind(rendered["node-cache-draft"], "PersistentVolumeClaim")
    assert pv["spec"]["local"] == {"path": "/var/lib/inferry/weights"} and "namespace" not in pv["metadata"]
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    terms = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [  # the engine's node selector and GPU product: where its pods may run
        {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]},
        {"key": "pool", "operator": "In", "values": ["h100"]}]}]
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"]
    assert pv["spec"]["claimRef"] == {"namespace": pvc["metadata"]["namespace"], "name": pvc["metadata"]["name"]}
    pod = by_kind(rendered["node-cache-draft"], "Deployment")[0]["spec"]["template"]["spec"]
    assert {"name": "node-cache", "persistentVolumeClaim": {"claimName": pvc["metadata"]["name"]}} in pod["volumes"]
    engine = pod["containers"][0]
    assert {"name": "node-cache", "mountPath": "/var/cache/inferry-weights", "readOnly": True} in engine["volumeMounts"]
    init = pod["initContainers"]
    assert [c["name"] for c in init] == ["fetch-weights", "verify-weights", "fetch-extra-0", "verify-extra-0"]
    for c in init:
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert env["CACHE_DIR"] == "/var/cache/inferry-weights" and env["CACHE_BYTES"] == str(500 << 30)
        assert {"name": "node-cache", "mountPath": "/var/cache/inferry-weights", "readOnly": False} in c["volumeMounts"]


def test_tensorrt_llm_behind_the_gateway_keeps_its_proxy_without_any_key(rendered):
    """The gateway checks keys; the pod's nginx only puts the engine (on 127.0.0.1) on the pod's address."""
    objs = rendered["trtllm-gateway"]
    pod = [d for d in by_kind(objs, "Deployment") if d["metadata"]["name"].endswith("-gateway") is False][0]
    proxy = next(c for c in pod["spec"]["template"]["spec"]["containers"] if c["name"] == "auth-proxy")
    assert not any("API_KEY" in e["name"] for e in proxy["env"])
    (mount,) = proxy["volumeMounts"]
    assert mount["subPath"] == "engine-proxy.conf.template"
    config = next(c for c in by_kind(objs, "ConfigMap") if "engine-proxy.conf.template" in c["data"])
    assert "auth-proxy.conf.template" not in config["data"]
    assert "Authorization" not in config["data"]["engine-proxy.conf.template"]
    engine_secret = next(s for s in by_kind(objs, "Secret") if s["metadata"]["name"].endswith("-secrets"))
    assert "serving.api_key" not in engine_secret["stringData"]  # only the gateway's Secret holds keys


def test_streaming_fetches_nothing_and_fixed_replicas(rendered):
    dep = by_kind(rendered["stream-fixed-replicas"], "Deployment")[0]["spec"]
    assert dep["replicas"] == 3 and "initContainers" not in dep["template"]["spec"]
    assert not any(v["name"] == "weights" for v in dep["template"]["spec"]["volumes"])
    env = {e["name"] for e in dep["template"]["spec"]["containers"][0]["env"]}
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= env


def test_autoscalers_follow_the_queue_and_leave_replicas_alone(rendered):
    so = by_kind(rendered["bundled"], "ScaledObject")[0]["spec"]
    trigger = so["triggers"][0]
    assert trigger["type"] == "prometheus" and "vllm:num_requests_waiting" in trigger["metadata"]["query"]
    assert (so["minReplicaCount"], so["maxReplicaCount"], trigger["metadata"]["threshold"]) == (2, 6, "5")
    assert "replicas" not in by_kind(rendered["bundled"], "Deployment")[0]["spec"]
    hpa = by_kind(rendered["pvc-hpa-pdb-monitor"], "HorizontalPodAutoscaler")[0]["spec"]
    assert hpa["metrics"][0]["pods"]["metric"]["name"] == "vllm_num_requests_waiting"


def test_scale_to_zero_wakes_on_the_gateways_authenticated_requests(rendered):
    manifests = rendered["scale-to-zero-ingress"]
    (so,) = by_kind(manifests, "ScaledObject")
    spec = so["spec"]
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (0, 4)
    (wake,) = spec["triggers"]  # no engine ServiceMonitor: the gateway's requests alone scale it
    assert wake["metadata"]["activationThreshold"] == "0" and 'handler="log_append"' in wake["metadata"]["query"]
    (monitor,) = by_kind(manifests, "ServiceMonitor")
    gw = next(s for s in by_kind(manifests, "Service") if s["metadata"]["name"].endswith("-gateway"))
    assert f'service="{gw["metadata"]["name"]}"' in wake["metadata"]["query"]
    labels = gw["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in monitor["spec"]["selector"]["matchLabels"].items())
    assert monitor["spec"]["endpoints"][0]["port"] in {p["name"] for p in gw["spec"]["ports"]}
    rule = by_kind(manifests, "Ingress")[0]["spec"]
    assert rule["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"] == gw["metadata"]["name"]
    assert rule["tls"] == [{"hosts": ["llm.example.eu"], "secretName": "llm-tls"}]
    # The metrics port is for the scraper's namespace only; the API port for everyone.
    policy = next(p for p in by_kind(manifests, "NetworkPolicy") if p["metadata"]["name"].endswith("-gateway"))
    api, metrics = policy["spec"]["ingress"]
    assert "from" not in api and metrics["from"][0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "monitoring"}


def test_build_job_runs_before_the_deployment_and_objects_wait_for_their_inputs():
    _, _, target = _run_component("trtllm-build-tp2")
    waits = target.waits_for
    assert {"build", "secrets", "config", "namespace"} <= set(waits["deployment"])
    assert {"secrets", "config", "namespace"} <= set(waits["build"])
    assert {"rollout", "service"} <= set(waits["scaledobject"]) and waits["namespace"] == ()
    assert waits["rollout"] == ("deployment",)  # the rollout is awaited by inferry (rollout.py), then the rest
    assert "rollout" in waits["service"]  # else pulumi-kubernetes' Service await holds a failed rollout 10 min


def test_pods_select_only_serving_pods(rendered):
    manifests = rendered["trtllm-build-tp2"]
    selector = by_kind(manifests, "Service")[0]["spec"]["selector"]
    job_labels = by_kind(manifests, "Job")[0]["spec"]["template"]["metadata"]["labels"]
    assert not all(job_labels.get(k) == v for k, v in selector.items())
    pdb = by_kind(manifests, "PodDisruptionBudget")[0]["spec"]
    assert pdb["selector"]["matchLabels"] == selector


def _value() -> str:
    """A stand-in secret value the gateway accepts as a key (256 random bits), marked to be found wherever it lands."""
    return f"s3cr3t-{secrets_module.token_hex(32)}"


def _run_component(case="bundled", secrets=None):
    d = deployment(case)
    values = secrets if secrets is not None else {p: pulumi.Output.secret(_value()) for p in d.secret_refs()}
    holder = {}

    def program():
        t = KubernetesTarget("kubernetes", TargetArgs(d, spec_of(d), values))
        holder["t"] = t
        pulumi.export("endpoint", t.endpoint)
        pulumi.export("endpoints", t.endpoints)
        pulumi.export("model", t.model)

    mocks, exports = run(program, {}, [])
    return mocks, exports, holder["t"]


@pytest.mark.parametrize("case", ["bundled", "stream-fixed-replicas"])  # with the gateway, and without it
def test_secret_values_only_in_the_secret_and_marked_secret(case):
    d = deployment(case)
    values = {p: _value() for p in d.secret_refs()}
    mocks, _, _ = _run_component(case, {p: pulumi.Output.secret(v) for p, v in values.items()})
    secrets = {r.name: r.inputs["stringData"] for r in mocks.of_type("kubernetes:core/v1:Secret")}
    assert all(SECRET_SIG in data for data in secrets.values())  # secret Outputs: encrypted in state, hidden in logs
    engine = secrets.pop("inferry-llama-3-1-8b-instruct-secrets")["value"]
    storage = {"storage.access_key_id", "storage.secret_access_key"}
    if d.target.gateway is None:  # the engine (or its auth proxy) checks the key
        assert engine == {k: values[k] for k in ["serving.api_key", *storage]} and not secrets
    else:  # only the gateway's Caddy config holds the key; the engine pods never see it
        assert engine == {k: values[k] for k in storage}
        (gateway,) = secrets.values()
        assert f'"Bearer {values["serving.api_key"]}"' in gateway["value"]["caddy.json"]
    others = json.dumps([r.inputs for r in mocks.resources if r.type != "kubernetes:core/v1:Secret"])
    assert "s3cr3t-" not in others


def test_explicit_provider_and_outputs():
    mocks, exports, _ = _run_component()
    (provider,) = mocks.of_type("pulumi:providers:kubernetes")
    assert provider.inputs["context"] == "eks-inference" and provider.inputs["kubeconfig"]
    k8s_objects = [r for r in mocks.resources if r.type.startswith("kubernetes:")]
    assert k8s_objects and all(r.provider and provider.name in r.provider for r in k8s_objects)
    # The gateway's Service (port 80) is the endpoint: the engine's own Service is reachable only from it.
    assert exports["endpoint"] == "http://inferry-llama-3-1-8b-instruct-gateway.inferry.svc.cluster.local"
    assert exports["endpoints"] == [exports["endpoint"]] and exports["model"] == "llama-3.1-8b-instruct"
    (component,) = mocks.of_type("inferry:targets:KubernetesTarget")
    assert component.name == "kubernetes"
    # The provider is a child of the component (its URN carries the parent type), never a default provider.
    assert "::inferry:targets:KubernetesTarget$pulumi:providers:kubernetes::" in k8s_objects[0].provider


def test_validators_reject_what_they_should(rendered):
    dep = json.loads(json.dumps(by_kind(rendered["bundled"], "Deployment")[0]))
    dep["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(dep)
    so = json.loads(json.dumps(by_kind(rendered["bundled"], "ScaledObject")[0]))
    so["spec"]["minReplicas"] = 1  # KEDA spells it minReplicaCount
    with pytest.raises(jsonschema.ValidationError):
        validate(so)


def test_missing_secret_value_is_a_clear_error():
    with pytest.raises(InferryError) as info:
        _run_component(secrets={"serving.api_key": "k"})
    assert "storage.access_key_id" in info.value.message and info.value.fix
