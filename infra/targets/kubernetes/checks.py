"""`inferry validate` checks for Kubernetes targets: names, label keys and values, quantities, scaling."""
from __future__ import annotations

import re

from infra.stack.config import Deployment
from infra.targets.kubernetes.config import AWS_CLI_IMAGE, KubernetesTarget as TargetSection
from infra.engines.registry import engine_for
from infra.errors import ConfigError, Problem
from infra.targets.kubernetes.names import app_name

# Kubernetes apimachinery validation rules (k8s.io/apimachinery/pkg/util/validation).
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def label_key_problem(key: str) -> str | None:
    """Why key is not a valid label key ([prefix/]name), or None."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.fullmatch(prefix)):
        return "prefix must be a lowercase DNS subdomain (e.g. example.com)"
    if not name or len(name) > 63 or not QUALIFIED_NAME.fullmatch(name):
        return "name must be 1-63 characters: letters, digits, '-', '_', '.', alphanumeric at both ends"
    return None


def label_value_problem(value: str) -> str | None:
    """Why value is not a valid label value, or None."""
    if len(value) > 63 or not LABEL_VALUE.fullmatch(value):
        return "label values are at most 63 characters: letters, digits, '-', '_', '.', alphanumeric at both ends"
    return None


def _labels(path: str, labels: dict[str, str]) -> list[Problem]:
    problems = []
    for key, value in labels.items():
        why = label_key_problem(key)
        if why:
            problems.append(Problem(f"{path}.{key}", f"invalid label key: {why}", repr(key)))
        why = label_value_problem(value)
        if why:
            problems.append(Problem(f"{path}.{key}", f"invalid label value: {why}", repr(value)))
    return problems


def _scaling(d: Deployment, t: TargetSection) -> list[Problem]:
    a = t.autoscaling
    problems = []
    if a is not None and not a.scale_to_zero and a.metric is None and engine_for(d.engine.kind).queue_metric is None:
        problems.append(Problem("target.autoscaling.metric", f"{d.engine.kind} exports no queue gauge inferry knows",
                                hint="name a per-pod Prometheus gauge, or use scale_to_zero (woken by the "
                                "gateway's requests)"))
    if a is not None and a.engine == "keda" and not a.scale_to_zero and not t.service_monitor:
        # KEDA asks Prometheus; without a scrape the query is empty and the autoscaler never sees its metric.
        problems.append(Problem("target.service_monitor", "the KEDA Prometheus trigger reads the engine's queue "
                                f"gauge from {a.prometheus_url}, but nothing makes Prometheus scrape the engine pods",
                                "false", hint="set target.service_monitor: true (a Prometheus operator ServiceMonitor "
                                "for the engine's /metrics)"))
    problems += _scale_to_zero(t) if a is not None and a.scale_to_zero else []
    if a is not None and a.engine == "hpa" and a.cooldown_s > 3600:
        problems.append(Problem("target.autoscaling.cooldown_s", "an HPA stabilization window is at most 3600 s",
                                repr(a.cooldown_s), hint="lower it, or use engine: keda"))
    floor = t.replicas if a is None else a.min_replicas
    if t.pdb_min_available is not None and t.pdb_min_available >= max(floor, 1):
        problems.append(Problem("target.pdb_min_available", f"not below the replica floor ({floor}): "
                                "draining a node would wait forever", repr(t.pdb_min_available),
                                hint="keep it at least one below replicas / min_replicas",
                                severity="error" if a is None and t.pdb_min_available > t.replicas else "warning"))
    if t.ingress and t.ingress.tls_secret is None:
        problems.append(Problem("target.ingress.tls_secret", "no TLS: the API key would cross the network in clear",
                                hint="name a kubernetes.io/tls Secret", severity="warning"))
    return problems


def _scale_to_zero(t: TargetSection) -> list[Problem]:
    """What scale to zero needs: KEDA (an HPA never goes below one) and a gateway that holds the first request."""
    a, problems = t.autoscaling, []
    if a.engine != "keda":
        problems.append(Problem("target.autoscaling.scale_to_zero", "needs engine: keda (it scales from zero "
                                "on the gateway's requests; an HPA never goes below one)", repr(a.engine),
                                hint="set target.autoscaling.engine: keda"))
    if t.gateway is None:
        problems.append(Problem("target.autoscaling.scale_to_zero", "needs target.gateway: the gateway holds a "
                                "request while no engine pod is ready and counts it to wake one", "no gateway",
                                hint="add `gateway: {hold_s: 300}` under target (hold_s: longer than a cold "
                                "start, docs/kubernetes.md)"))
    if t.gateway is not None and t.gateway.hold_s == 0:
        problems.append(Problem("target.gateway.hold_s", "0: the first request after an idle time would get 503 "
                                "at once instead of waiting for the replica it wakes", "0",
                                hint="set it above the measured cold start (docs/kubernetes.md)"))
    return problems


def check_kubernetes(d: Deployment) -> list[Problem]:
    """Every Kubernetes-specific problem of a schema-valid deployment."""
    t = d.target
    if not isinstance(t, TargetSection):
        return []
    problems = _labels("target.labels", t.labels) + _labels("target.node_selector", t.node_selector)
    problems += _scaling(d, t) + _fetch_client(d, t)
    for i, tol in enumerate(t.tolerations):
        why = label_key_problem(tol.key)
        if why:
            problems.append(Problem(f"target.tolerations[{i}].key", f"invalid taint key: {why}", repr(tol.key)))
    if not t.context:
        problems.append(Problem("target.context", "required: inferry never deploys to the ambient current-context",
                                hint="set the kubeconfig context name (kubectl config get-contexts)"))
    if t.weights_delivery != "stream" and not d.model.in_store:
        problems.append(Problem("model.weights", "pods fetch weights from the store: expected the model's key "
                                "prefix in storage.bucket, e.g. llama-3.1-8b-instruct", repr(d.model.weights)))
    if len(app_name(d)) > 52:
        problems.append(Problem("model.name", "too long for Kubernetes object names", repr(d.model.name)))
    if t.ingress is not None and t.gateway is None:
        problems.append(Problem("target.ingress", "routes the internet to the engine itself: every path it serves "
                                "is public (/metrics, /docs, its admin and weight routes), and the engine checks the "
                                "key alone", f"host {t.ingress.host} with no target.gateway", severity="warning",
                                hint="add `gateway: {}` under target: the Ingress then reaches Caddy pods that check "
                                     "keys and refuse every other path"))
    return problems


def _fetch_client(d: Deployment, t: TargetSection) -> list[Problem]:
    """The default fetch image holds s5cmd alone, which addresses a custom endpoint path-style only and reads '*' and
    '?' in a key prefix as wildcards (templates/kubernetes/store.sh takes the aws CLI for those, where it has one)."""
    if t.fetch_image != TargetSection.model_fields["fetch_image"].default:
        return []
    if d.storage.addressing_style != "path":
        why = "s5cmd (the default image's client) addresses the store path-style only, not as storage.addressing_style"
    else:
        odd = [p for p in _fetched_prefixes(d) if any(c in p for c in "*?")]
        if not odd:
            return []
        why = f"s5cmd (the default image's client) would read '*' and '?' in the key prefix {odd[0]!r} as wildcards"
    return [Problem("target.fetch_image", why, repr(t.fetch_image),
                    hint=f"set target.fetch_image to an image with the aws CLI, such as {AWS_CLI_IMAGE}")]


def _fetched_prefixes(d: Deployment) -> list[str]:
    """The key prefixes the pods fetch (the model's alone when the engine's spec cannot be built: that is reported
    by the engine's own checks)."""
    from infra.engines import service_spec
    from infra.targets.kubernetes.weights import store_prefixes

    try:
        return store_prefixes(d, service_spec(d))
    except ConfigError:
        return [d.model.weights_prefix or ""]


def refuse_broken_scaling(d: Deployment) -> None:
    """ConfigError for an autoscaler validate refuses (one that could never see its metric): render and up stop."""
    t = d.target
    errors = [p for p in _scaling(d, t) if p.severity == "error"] if isinstance(t, TargetSection) else []
    if errors:
        raise ConfigError("stack", errors)
