"""The record of processing on a cluster: each serving pod's node (its region, zone and GPUs as the node reports
them), the engine container's telemetry switches and options as the API server holds them, and the door."""
from __future__ import annotations

from typing import Any

from infra.errors import InferryError
from infra.stack.config import Deployment
from infra.targets.contract import Door, ReplicaFacts, Source
from infra.targets.kubernetes.names import GPU_PRODUCT_LABEL

REGION, ZONE = "topology.kubernetes.io/region", "topology.kubernetes.io/zone"
SERVICE = "the Service reaches each pod's auth proxy or engine on the pod network"
GATEWAY = "the gateway's Caddy pods check the key and reach the engine's Service on the pod network"


def door(d: Deployment) -> Door:
    """The Ingress when the stack has one (TLS there, from its Secret), else the in-cluster Service."""
    from infra.targets.kubernetes.names import app_name

    t = d.target
    keys = 1 + (t.gateway is not None and d.serving.previous_api_key is not None)
    to = GATEWAY if t.gateway is not None else SERVICE
    if t.ingress is None and t.gateway is not None:
        return Door(f"http://{app_name(d)}-gateway.{t.namespace}.svc.cluster.local",
                    "none: reachable inside the cluster only (no Ingress)", keys, (), to)
    if t.ingress is None:
        return Door(f"http://{app_name(d)}.{t.namespace}.svc.cluster.local:{d.serving.port}",
                    "none: reachable inside the cluster only (no Ingress)", 1, (), SERVICE)
    if t.ingress.tls_secret:
        return Door(f"https://{t.ingress.host}", f"at the Ingress, from Secret {t.ingress.tls_secret}", keys, (443,),
                    to)
    return Door(f"http://{t.ingress.host}", "off: plain HTTP at the Ingress (no target.ingress.tls_secret)", keys,
                (80,), to)


def run_time_sources(d: Deployment) -> list[Source]:
    """Every image the pods pull: the engine's, the weights fetcher's, the auth proxy's."""
    from infra.targets.kubernetes.deploy import spec_for
    from infra.targets.kubernetes.proxy import proxy_image

    spec, t = spec_for(d), d.target
    out = [Source("engine image", spec.image, "engine.image")]
    if t.weights_delivery != "stream" and not spec.streams_weights:
        out.append(Source("weights fetcher image", t.fetch_image, "target.fetch_image"))
    if spec.needs_auth_proxy:
        out.append(Source("auth proxy image", proxy_image(), "serving.api_key"))
    if t.gateway is not None:
        out.append(Source("gateway image", t.gateway.image, "target.gateway.image"))
    return out


def _pod_facts(pod: Any, node: Any, switches: list[str]) -> ReplicaFacts:
    labels = (node.metadata.labels or {}) if node is not None else {}
    engine = next((c for c in pod.spec.containers if c.name == "engine"), pod.spec.containers[0])
    env = {e.name: e.value for e in engine.env or [] if e.name in switches and e.value is not None}
    argv = [*(engine.command or []), *(engine.args or [])]
    flags = tuple(dict.fromkeys(a.split("=", 1)[0] for a in argv if a.startswith("-") and a.lstrip("-")[:1].isalpha()))
    gpus = int((node.status.allocatable or {}).get("nvidia.com/gpu", 0)) if node is not None else 0
    place = {"node": pod.spec.node_name or "(not scheduled)",
             **{name: labels[key] for name, key in (("region", REGION), ("zone", ZONE)) if key in labels}}
    data = tuple(f"volume {v.name}" for v in pod.spec.volumes or [] if v.persistent_volume_claim or v.empty_dir)
    gpu = labels.get(GPU_PRODUCT_LABEL, "nvidia.com/gpu")
    return ReplicaFacts(f"pod {pod.metadata.name}", place, gpus=(gpu,) * gpus, env=env, flags=flags, data=data,
                        error=None if pod.status.phase == "Running" else f"pod is {pod.status.phase}")


def replica_facts(d: Deployment) -> list[ReplicaFacts]:
    """Every serving pod, read from the API server."""
    from infra.engines.registry import expected_switches
    from infra.targets.kubernetes.inside import engine_pods

    t = d.target
    switches = list(expected_switches(d))
    try:
        core, pods = engine_pods(d)
        nodes = {n.metadata.name: n for n in core.list_node().items}  # type: ignore[attr-defined]
    except InferryError as e:
        return [ReplicaFacts(f"cluster {t.context or ''}".strip(), error=f"not read: {e.message}")]
    except Exception as e:  # noqa: BLE001  (the API's own errors: unreachable, forbidden)
        return [ReplicaFacts(f"cluster {t.context or ''}".strip(), error=f"not read: {type(e).__name__}: "
                             f"{str(e).splitlines()[0][:200] if str(e) else ''}")]
    if not pods:
        return [ReplicaFacts(f"namespace {t.namespace}", error="no serving pod (not applied, or scaled to zero)")]
    return [_pod_facts(p, nodes.get(p.spec.node_name or ""), switches) for p in pods]

