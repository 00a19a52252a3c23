"""The gateway on a cluster: Caddy pods in front of the engine's Service, their config computed by
infra/gateway/caddy.py exactly as on SSH hosts (keys and the allowlist at the edge), TLS left to the Ingress."""
from __future__ import annotations

import posixpath
from typing import Any

from infra.gateway.caddy import GatewayPlan, GatewaySecrets, caddy_json, key_id
from infra.targets.kubernetes.context import DRAIN, Ctx

PORT = 8080  # the pods' port (no capability needed to bind it); the Service answers on 80
METRICS_PORT = 9180  # Caddy's request metrics, for the scraper's namespace only (gateway_policy_spec)
STATE = "/data"  # Caddy's state: its admin socket, logs and access log (an emptyDir: the pod's own)
CONF_DIR, CONF = "/etc/caddy", "caddy.json"
GATEWAY_UID = 65532  # the gateway pods' user and group (distroless's "nonroot"): no user of the image's own


def gateway_name(ctx: Ctx) -> str:
    """Name of the gateway's Deployment, Service and Secret."""
    return f"{ctx.name}-gateway"


def secret_name(ctx: Ctx, config_hash_value: str) -> str:
    """The Secret with one version of the config: its name changes with it (config_hash)."""
    return f"{gateway_name(ctx)}-{config_hash_value}"


def gateway_plan(ctx: Ctx, service_ip: str | None = None) -> GatewayPlan:
    """Caddy's config without its keys: plain HTTP on PORT (the Ingress terminates TLS), one upstream (the
    engine's Service, which spreads over the ready pods): its cluster IP once the API server gave it one (no
    cluster DNS needed), else its DNS name."""
    from infra.engines.registry import engine_for

    g = ctx.t.gateway
    assert g is not None
    host = service_ip or f"{ctx.name}.{ctx.ns}.svc.cluster.local"
    return GatewayPlan(state_dir=STATE, upstreams=(f"{host}:{ctx.spec.port}",),
                       api_routes=engine_for(ctx.d.engine.kind).api_routes, health_path=ctx.spec.health_path,
                       tls="off", http_port=PORT, max_body_bytes=g.max_body_mb << 20, hold_s=g.hold_s,
                       balance="round_robin", access_log_days=g.access_log_days, metrics_port=METRICS_PORT,
                       behind_proxy=True, **g.limits.plan_fields())


def config_text(ctx: Ctx, keys: tuple[str, ...], service_ip: str | None = None) -> str:
    """The config the gateway pods run, keys included (it goes into a Secret, never a ConfigMap)."""
    return caddy_json(gateway_plan(ctx, service_ip), GatewaySecrets(keys))


def config_hash(ctx: Ctx, keys: tuple[str, ...], service_ip: str | None = None) -> str:
    """Rolls the gateway pods when the config or a key changes: the plan and the key ids, never the keys."""
    from infra.targets.kubernetes.names import short_hash

    return short_hash(repr(gateway_plan(ctx, service_ip)), *map(key_id, keys))


def pod_spec(ctx: Ctx, config_hash_value: str) -> dict[str, Any]:
    """One Caddy container: the config from the Secret, its state in an emptyDir, no API token, confined."""
    g = ctx.t.gateway
    assert g is not None
    xdg = posixpath.join(STATE, "xdg")
    container = {
        "name": "gateway", "image": g.image, "command": ["caddy", "run", "--config", posixpath.join(CONF_DIR, CONF)],
        "env": [{"name": "HOME", "value": STATE}, {"name": "XDG_DATA_HOME", "value": xdg},
                {"name": "XDG_CONFIG_HOME", "value": xdg}],
        "ports": [{"name": "http", "containerPort": PORT, "protocol": "TCP"},
                  {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
        "volumeMounts": [{"name": "config", "mountPath": CONF_DIR, "readOnly": True},
                         {"name": "state", "mountPath": STATE}],
        # Ready once it listens: it holds requests while no engine pod is (hold_s), and says so on /health.
        "readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 2, "failureThreshold": 3},
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "512Mi"}},
        "lifecycle": DRAIN,  # serves on while kube-proxy takes it out of the Service: a roll fails no request
        # The official image's binary carries cap_net_bind_service=+ep: exec fails with EPERM unless that one
        # capability is in the bounding set (caddy-docker#396), so it is the one kept, and the only one the
        # process holds (as a user, below: the real-node test reads its /proc status).
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}},
    }
    where: dict[str, Any] = {"nodeSelector": dict(g.node_selector)} if g.node_selector else {}
    if g.tolerations:
        where["tolerations"] = [t.model_dump(exclude_none=True) for t in g.tolerations]
    # Not root: the pod faces the Ingress, and binds only 8080 and 9180. fsGroup lets that user read the config
    # Secret (the kubelet gives the group read on it); its state is an emptyDir, writable by anyone in the pod.
    confined = {"seccompProfile": {"type": "RuntimeDefault"}, "runAsNonRoot": True, "runAsUser": GATEWAY_UID,
                "runAsGroup": GATEWAY_UID, "fsGroup": GATEWAY_UID}
    return {"automountServiceAccountToken": False, "securityContext": confined,
            **where, "containers": [container], "terminationGracePeriodSeconds": 30,
            "volumes": [{"name": "config", "secret": {"secretName": secret_name(ctx, config_hash_value),
                                                      "defaultMode": 0o400}},
                        {"name": "state", "emptyDir": {}}]}


def deployment_spec(ctx: Ctx, config_hash_value: Any) -> dict[str, Any]:
    """The gateway's Deployment: a surge pod before an old one goes, so a key rotation fails no request."""
    labels = ctx.labels("gateway")
    return {"replicas": ctx.t.gateway.replicas, "selector": {"matchLabels": selector(ctx)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {"metadata": {"labels": labels, "annotations": {"inferry.dev/config-hash": config_hash_value}},
                         "spec": pod_spec(ctx, config_hash_value)}}


def selector(ctx: Ctx) -> dict[str, str]:
    """Labels that select the gateway's pods (never the engine's: the engine Service selects component engine)."""
    from infra.targets.kubernetes.names import selector_labels

    return {**selector_labels(ctx.d), "app.kubernetes.io/component": "gateway"}


def service_spec(ctx: Ctx) -> dict[str, Any]:
    """The gateway's Service: what the Ingress (and in-cluster clients) call."""
    return {"type": "ClusterIP", "selector": selector(ctx),
            "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"},
                      {"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"}]}


def _scraper(ctx: Ctx) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ctx.t.gateway.scraper_namespace}}}


def gateway_policy_spec(ctx: Ctx) -> dict[str, Any]:
    """Gateway pods take API traffic from anywhere (the Ingress, clients) and metrics scrapes from the
    scraper's namespace alone."""
    return {"podSelector": {"matchLabels": selector(ctx)}, "policyTypes": ["Ingress"],
            "ingress": [{"ports": [{"port": "http", "protocol": "TCP"}]},
                        {"from": [_scraper(ctx)], "ports": [{"port": "metrics", "protocol": "TCP"}]}]}


def network_policy_spec(ctx: Ctx) -> dict[str, Any]:
    """Engine pods take connections only from the gateway's pods and from the metrics scraper's namespace: the
    engines carry no key, so nothing else in the cluster may reach them (where the CNI enforces policies)."""
    return {"podSelector": {"matchLabels": ctx.selector}, "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": selector(ctx)}}, _scraper(ctx)],
                         "ports": [{"port": "http", "protocol": "TCP"}]}]}
