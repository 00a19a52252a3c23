"""Service, Ingress, PodDisruptionBudget, autoscalers (KEDA, HPA) and ServiceMonitor bodies."""
from __future__ import annotations

from typing import Any

from infra.targets.kubernetes.context import Ctx

KEDA_API = "keda.sh/v1alpha1"
MONITOR_API = "monitoring.coreos.com/v1"
POLL_S = 15  # how often KEDA asks Prometheus (and decides 0 -> 1)
WAKE_WINDOW = "1m"  # a request within it keeps a woken deployment up (then cooldown_s, then zero)


def queue_metric(ctx: Ctx) -> str | None:
    """The per-pod queue gauge the autoscaler follows: the stack's, else the engine's own."""
    a = ctx.t.autoscaling
    return (a.metric if a and a.metric else None) or ctx.spec.queue_metric


def service_spec(ctx: Ctx) -> dict[str, Any]:
    """A ClusterIP Service in front of the serving pods."""
    return {"type": "ClusterIP", "selector": ctx.selector,
            "ports": [{"name": "http", "port": ctx.spec.port, "targetPort": "http", "protocol": "TCP"}]}


def ingress_spec(ctx: Ctx, backend: str, port: int) -> dict[str, Any]:
    """An Ingress for ingress.host, with TLS when a certificate Secret is named."""
    ing = ctx.t.ingress
    rule = {"host": ing.host, "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {
        "service": {"name": backend, "port": {"number": port}}}}]}}
    spec: dict[str, Any] = {"rules": [rule]}
    if ing.class_name:
        spec["ingressClassName"] = ing.class_name
    if ing.tls_secret:
        spec["tls"] = [{"hosts": [ing.host], "secretName": ing.tls_secret}]
    return spec


def pdb_spec(ctx: Ctx) -> dict[str, Any]:
    """Keep min_available serving pods through voluntary disruptions (node drains)."""
    return {"minAvailable": ctx.t.pdb_min_available, "selector": {"matchLabels": ctx.selector}}


def prometheus_query(ctx: Ctx) -> str:
    """Total waiting requests of this model in this namespace (KEDA divides by replicas: AverageValue)."""
    return f'sum({queue_metric(ctx)}{{namespace="{ctx.ns}",model_name="{ctx.spec.served_model_name}"}})'


def wake_query(ctx: Ctx) -> str:
    """Requests that passed the gateway's key check, in flight (held while no engine pod is ready, or proxied),
    plus one while any came within the last WAKE_WINDOW (short requests between two scrapes keep it warm). An
    anonymous request never reaches the counted handler: it cannot start a GPU."""
    from infra.gateway.caddy import WAKE_HANDLER
    from infra.targets.kubernetes.gateway import gateway_name

    sel = f'namespace="{ctx.ns}",service="{gateway_name(ctx)}",server="gateway",handler="{WAKE_HANDLER}"'
    return (f"(sum(caddy_http_requests_in_flight{{{sel}}}) or vector(0)) + "
            f"((sum(increase(caddy_http_requests_total{{{sel}}}[{WAKE_WINDOW}])) > bool 0) or vector(0))")


def _queue_trigger(ctx: Ctx) -> dict[str, Any]:
    a = ctx.t.autoscaling
    return {"type": "prometheus", "metricType": "AverageValue", "metadata": {
        "serverAddress": a.prometheus_url, "query": prometheus_query(ctx), "threshold": str(a.queue_target)}}


def _wake_trigger(ctx: Ctx) -> dict[str, Any]:
    a = ctx.t.autoscaling
    return {"type": "prometheus", "metricType": "AverageValue", "name": "gateway-requests", "metadata": {
        "serverAddress": a.prometheus_url, "query": wake_query(ctx), "threshold": str(a.concurrency_target),
        "activationThreshold": "0"}}


def scaled_object_spec(ctx: Ctx) -> dict[str, Any]:
    """KEDA ScaledObject: min..max replicas on the engine's queue through a Prometheus trigger; with scale to
    zero, 0..max, woken by the gateway's authenticated requests (the gateway holds them meanwhile)."""
    a = ctx.t.autoscaling
    triggers = [_queue_trigger(ctx)] if not ctx.scales_to_zero or ctx.t.service_monitor else []
    if ctx.scales_to_zero:
        triggers.append(_wake_trigger(ctx))
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": ctx.name},
        "minReplicaCount": a.min_replicas, "maxReplicaCount": a.max_replicas,
        "pollingInterval": POLL_S, "cooldownPeriod": a.cooldown_s,
        "triggers": triggers,
        # cooldownPeriod is KEDA's wait before scaling to zero only; scaling in between min and max is the HPA's
        # (5 min by default): cooldown_s sets both, as it sets the plain HPA's.
        "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {
            "scaleDown": {"stabilizationWindowSeconds": a.cooldown_s}}}},
    }


def hpa_metric_name(ctx: Ctx) -> str:
    """The custom-metrics API name (prometheus-adapter exposes vllm:x as vllm_x)."""
    return (queue_metric(ctx) or "").replace(":", "_")


def hpa_spec(ctx: Ctx) -> dict[str, Any]:
    """autoscaling/v2 HPA on the per-pod queue gauge (served by prometheus-adapter)."""
    a = ctx.t.autoscaling
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": ctx.name},
        "minReplicas": max(1, a.min_replicas), "maxReplicas": a.max_replicas,
        "metrics": [{"type": "Pods", "pods": {"metric": {"name": hpa_metric_name(ctx)},
                                              "target": {"type": "AverageValue",
                                                         "averageValue": str(a.queue_target)}}}],
        # Loading a model takes minutes: scale down slowly so a burst does not pay two cold starts.
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": a.cooldown_s}},
    }


def service_monitor_spec(ctx: Ctx) -> dict[str, Any]:
    """Prometheus operator ServiceMonitor scraping the engine's metrics path."""
    return {"selector": {"matchLabels": ctx.selector},
            "endpoints": [{"port": "http", "path": ctx.spec.metrics_path, "interval": "15s"}]}


def gateway_monitor_spec(ctx: Ctx) -> dict[str, Any]:
    """ServiceMonitor for the gateway's own request metrics (what wakes a deployment scaled to zero)."""
    from infra.targets.kubernetes import gateway

    return {"selector": {"matchLabels": gateway.selector(ctx)},
            "endpoints": [{"port": "metrics", "path": "/metrics", "interval": "15s"}]}
