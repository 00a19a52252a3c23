"""The serving pod: engine container from the ServiceSpec, probes, GPUs, shared memory, scheduling."""
from __future__ import annotations

import math
from typing import Any

from infra.engines.spec import EnvVar
from infra.errors import InferryError
from infra.targets.kubernetes import proxy, weights
from infra.targets.kubernetes.context import DRAIN, Ctx
from infra.targets.kubernetes.expansion import literal_containers
from infra.targets.kubernetes.names import GPU_PRODUCT_LABEL, memory_quantity, short_hash

GPU_RESOURCE = "nvidia.com/gpu"
# The startup probe's period: a pod is Ready at most this long after its engine answers. 10 s left a scale-up on a
# warm node idle 7-8 s of its 11 s on the real node (bench/coldstart.py); /health costs the engine next to nothing.
STARTUP_PERIOD_S = 2


def env_entry(ctx: Ctx, e: EnvVar) -> dict[str, Any]:
    """One spec env var: a plain value, or a secretKeyRef into the deployment's Secret."""
    if e.secret is None:
        return {"name": e.name, "value": e.value}
    if not e.secret_field:
        raise InferryError(f"engine env {e.name} is a secret without the stack field it belongs to",
                           "set EnvVar.secret_field in infra/engines", where="engine")
    return ctx.secret_ref(e.name, e.secret_field)


def engine_port_name(ctx: Ctx) -> str:
    """The engine's own port: "http" itself, or "engine" behind the auth proxy."""
    return "engine" if ctx.spec.needs_auth_proxy else "http"


def probes(ctx: Ctx) -> dict[str, Any]:
    """Startup sized for model loading (startup_timeout_s), then readiness and liveness on the health path."""
    # Always the pod's service port: behind the auth proxy the engine binds 127.0.0.1, which the kubelet
    # cannot reach; the proxy passes the health path through without a key. There the port is a number: the
    # kubelet looks a named port up in the probed container's own ports only, and "http" is the proxy's (a real
    # kubelet failed every engine probe with `strconv.Atoi: parsing "http"`).
    port = ctx.spec.port if ctx.spec.needs_auth_proxy else "http"
    get = {"path": ctx.spec.health_path, "port": port}
    failures = max(1, math.ceil(ctx.t.startup_timeout_s / STARTUP_PERIOD_S))
    return {
        "startupProbe": {"httpGet": get, "periodSeconds": STARTUP_PERIOD_S, "failureThreshold": failures,
                         "timeoutSeconds": 5},
        "readinessProbe": {"httpGet": get, "periodSeconds": 5, "failureThreshold": 3, "timeoutSeconds": 5},
        "livenessProbe": {"httpGet": get, "periodSeconds": 15, "failureThreshold": 4, "timeoutSeconds": 10},
    }


def engine_mounts(ctx: Ctx) -> list[dict[str, Any]]:
    """Shared memory, weights (read-only), and each engine file from the ConfigMap."""
    mounts = [{"name": "shm", "mountPath": "/dev/shm"}]
    if ctx.wants_weights_volume:
        mounts += weights.weight_mounts(ctx, read_only=True)
    mounts += [{"name": "config", "mountPath": f.mount_path, "subPath": f.name, "readOnly": True}
               for f in ctx.spec.files]
    return mounts


def engine_container(ctx: Ctx) -> dict[str, Any]:
    """The engine: image, command and args exactly as the ServiceSpec says (the SSH target runs the same)."""
    gpus = str(ctx.spec.gpus)
    container = {
        "name": "engine",
        "image": ctx.spec.image,
        "command": list(ctx.spec.command),
        "args": list(ctx.spec.args),
        "ports": [{"name": engine_port_name(ctx), "containerPort": ctx.spec.listen_port, "protocol": "TCP"}],
        "resources": {"limits": {GPU_RESOURCE: gpus, "memory": ctx.t.memory},
                      "requests": {GPU_RESOURCE: gpus, "cpu": ctx.t.cpu, "memory": ctx.t.memory}},
        "volumeMounts": engine_mounts(ctx),
        **probes(ctx),
        "lifecycle": DRAIN,
    }
    if ctx.spec.env:
        container["env"] = [env_entry(ctx, e) for e in ctx.spec.env]
    return container


def scheduling(ctx: Ctx) -> dict[str, Any]:
    """Node selector, tolerations and affinity: GPU product required, replicas spread over nodes."""
    out: dict[str, Any] = {}
    if ctx.t.node_selector:
        out["nodeSelector"] = dict(ctx.t.node_selector)
    if ctx.t.tolerations:
        out["tolerations"] = [t.model_dump(exclude_none=True) for t in ctx.t.tolerations]
    affinity: dict[str, Any] = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                            "labelSelector": {"matchLabels": ctx.selector}}}]}}
    if ctx.t.gpu_product:
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": GPU_PRODUCT_LABEL, "operator": "In", "values": [ctx.t.gpu_product]}]}]}}
    out["affinity"] = affinity
    return out


def volumes(ctx: Ctx) -> list[dict[str, Any]]:
    """Pod volumes: shared memory in RAM, the ConfigMap, the weights (and built engine)."""
    vols = [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": memory_quantity(ctx.spec.shm_size)}},
            {"name": "config", "configMap": {"name": ctx.config_name}}]
    if ctx.wants_weights_volume:
        vols += weights.weights_volumes(ctx)
        if ctx.spec.build is not None:
            vols.append({"name": "engine-build", "emptyDir": {}})
    return vols


# Every container: no privilege escalation, no capabilities (a container that needs some says so itself, as
# the auth proxy does). Non-root is left to the image: the engines' published images run as root.
CONFINED = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def confined(spec: dict[str, Any]) -> dict[str, Any]:
    """The pod spec with CONFINED on each container and init container that sets no securityContext itself."""
    for key in ("initContainers", "containers"):
        for c in spec.get(key, []):
            c.setdefault("securityContext", {**CONFINED, "capabilities": {"drop": ["ALL"]}})  # one per container
    return spec


def pod_common(ctx: Ctx) -> dict[str, Any]:
    """What the serving pod and the build Job's pod share: scheduling, volumes, no API token, the runtime's
    default seccomp profile."""
    return {"automountServiceAccountToken": False, "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            **scheduling(ctx), "volumes": volumes(ctx)}


def pod_spec(ctx: Ctx) -> dict[str, Any]:
    """The serving pod."""
    init = weights.init_containers(ctx) if ctx.wants_weights_volume else []
    containers = [engine_container(ctx)] + ([proxy.proxy_container(ctx)] if ctx.spec.needs_auth_proxy else [])
    spec = {**pod_common(ctx), "containers": containers,
            "terminationGracePeriodSeconds": 60}
    if init:
        spec["initContainers"] = init
    return literal_containers(confined(spec))


def deployment_spec(ctx: Ctx, config_digest: str) -> dict[str, Any]:
    """The Deployment: no surge pod (GPUs are rarely spare), replicas left to the autoscaler when there is one."""
    annotations = {"inferry.dev/config-hash": config_digest}
    spec: dict[str, Any] = {
        "selector": {"matchLabels": ctx.selector},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
        "template": {"metadata": {"labels": {**ctx.labels("engine"), **ctx.selector}, "annotations": annotations},
                     "spec": pod_spec(ctx)},
    }
    if ctx.t.autoscaling is None:
        spec["replicas"] = ctx.t.replicas
    return spec


def config_data(ctx: Ctx) -> dict[str, str]:
    """ConfigMap data: the engine's files (e.g. the TRT-LLM YAML) and the weight scripts."""
    data = weights.scripts(with_upload=ctx.spec.build is not None)
    if ctx.spec.needs_auth_proxy:
        data[proxy.template(ctx)] = (weights.TEMPLATES / proxy.template(ctx)).read_text(encoding="utf-8")
    for f in ctx.spec.files:
        if f.name in data:
            raise InferryError(f"engine file name {f.name!r} collides with an inferry script",
                               "rename the engine file", where="engine")
        data[f.name] = f.content
    return data


def digest(data: dict[str, str]) -> str:
    """A hash of the ConfigMap data: pods roll when an engine file changes."""
    return short_hash(*(f"{k}={v}" for k, v in sorted(data.items())))
