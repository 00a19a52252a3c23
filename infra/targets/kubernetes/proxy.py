"""The auth-proxy sidecar for engines that cannot check an API key (TensorRT-LLM): nginx in front of the engine."""
from __future__ import annotations

from typing import Any

from infra.stack.secretfix import SecretField
from infra.targets.kubernetes.context import DRAIN, Ctx

TEMPLATE = "auth-proxy.conf.template"
# Behind the gateway, which checks keys and removes them: the same nginx, putting the engine on the pod's address.
OPEN_TEMPLATE = "engine-proxy.conf.template"
# The nginx image renders /etc/nginx/templates/*.template with envsubst into conf.d at start.
TEMPLATE_PATH = "/etc/nginx/templates/default.conf.template"


def proxy_image() -> str:
    """The same nginx image the SSH target's proxy uses."""
    from infra.engines.spec import PROXY_IMAGE

    return PROXY_IMAGE


def template(ctx: Ctx) -> str:
    """The proxy's config template: the key check, or none behind the gateway."""
    return TEMPLATE if ctx.t.gateway is None else OPEN_TEMPLATE


def proxy_container(ctx: Ctx) -> dict[str, Any]:
    """nginx on the service port: /health and /metrics open, everything else needs `Bearer <api key>`; behind the
    gateway, no key (the gateway checked it)."""
    s = ctx.spec
    env = [{"name": "INFERRY_PORT", "value": str(s.port)},
           {"name": "INFERRY_ENGINE_PORT", "value": str(s.listen_port)}]
    if ctx.t.gateway is None:
        env += [{"name": "INFERRY_HEALTH_PATH", "value": s.health_path},
                {"name": "INFERRY_METRICS_PATH", "value": s.metrics_path},
                ctx.secret_ref("INFERRY_API_KEY", SecretField.API_KEY)]
    return {
        "name": "auth-proxy", "image": proxy_image(), "env": env,
        "ports": [{"name": "http", "containerPort": s.port, "protocol": "TCP"}],
        "volumeMounts": [{"name": "config", "mountPath": TEMPLATE_PATH, "subPath": template(ctx), "readOnly": True}],
        # Through the proxy to the engine: the pod is Ready only when both are.
        "readinessProbe": {"httpGet": {"path": s.health_path, "port": "http"}, "periodSeconds": 5,
                           "failureThreshold": 3, "timeoutSeconds": 5},
        "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "lifecycle": DRAIN,  # the proxy is the Service's endpoint: it drains with the engine
        # nginx's master (root) opens its logs and makes its temp folders in folders its own user owns, hands
        # them to the workers and switches those to that user: what it needs of root, nothing more.
        "securityContext": {"allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "DAC_OVERRIDE", "SETGID", "SETUID"]}},
    }
