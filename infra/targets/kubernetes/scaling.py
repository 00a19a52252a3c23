"""Service, Ingress, PodDisruptionBudget, autoscalers (KEDA, HPA, HTTP add-on) and ServiceMonitor bodies."""
from __future__ import annotations

from typing import Any

from infra.targets.kubernetes.context import Ctx

KEDA_API = "keda.sh/v1alpha1"
HTTP_ADDON_API = "http.keda.sh/v1alpha1"
MONITOR_API = "monitoring.coreos.com/v1"


def queue_metric(ctx: Ctx) -> str | None:
    """The per-pod queue gauge the autoscaler follows: the stack's, else the engine's own."""
    a = ctx.t.autoscaling
    return (a.metric if a and a.metric else None) or ctx.spec.queue_metric


def service_spec(ctx: Ctx) -> dict[str, Any]:
    """A ClusterIP Service in front of the serving pods."""
    return {"type": "ClusterIP", "selector": ctx.selector,
            "ports": [{"name": "http", "port": ctx.spec.port, "targetPort": "http", "protocol": "TCP"}]}


def wake_service_spec(ctx: Ctx) -> dict[str, Any]:
    """ExternalName to the HTTP add-on's interceptor: the Ingress sends traffic there so a request wakes a pod."""
    a = ctx.t.autoscaling
    return {"type": "ExternalName", "externalName": a.interceptor_host,
            "ports": [{"name": "http", "port": a.interceptor_port, "protocol": "TCP"}]}


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


def scaled_object_spec(ctx: Ctx) -> dict[str, Any]:
    """KEDA ScaledObject: min..max replicas on the engine's queue through a Prometheus trigger."""
    a = ctx.t.autoscaling
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": ctx.name},
        "minReplicaCount": a.min_replicas, "maxReplicaCount": a.max_replicas,
        "pollingInterval": 15, "cooldownPeriod": a.cooldown_s,
        "triggers": [{"type": "prometheus", "metricType": "AverageValue", "metadata": {
            "serverAddress": a.prometheus_url, "query": prometheus_query(ctx),
            "threshold": str(a.queue_target)}}],
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


def wake_hosts(ctx: Ctx) -> list[str]:
    """Host headers the interceptor routes to this model: the Ingress host and the in-cluster wake Service."""
    hosts = [f"{ctx.name}-wake.{ctx.ns}.svc.cluster.local"]
    return ([ctx.t.ingress.host] if ctx.t.ingress else []) + hosts


def http_scaled_object_spec(ctx: Ctx) -> dict[str, Any]:
    """KEDA HTTP add-on: 0..max replicas; a request held by the interceptor wakes a pod."""
    a = ctx.t.autoscaling
    return {
        "hosts": wake_hosts(ctx),
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": ctx.name,
                           "service": ctx.name, "port": ctx.spec.port},
        "replicas": {"min": a.min_replicas, "max": a.max_replicas},
        "scaledownPeriod": a.cooldown_s,
        "scalingMetric": {"concurrency": {"targetValue": a.concurrency_target}},
        # Hold the first request for as long as a cold start may take (weights + engine init).
        "timeouts": {"conditionWait": f"{ctx.t.startup_timeout_s}s"},
    }


def service_monitor_spec(ctx: Ctx) -> dict[str, Any]:
    """Prometheus operator ServiceMonitor scraping the engine's metrics path."""
    return {"selector": {"matchLabels": ctx.selector},
            "endpoints": [{"port": "http", "path": ctx.spec.metrics_path, "interval": "15s"}]}
