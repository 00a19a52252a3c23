"""Reading an engine pod from inside the cluster: its /metrics, for status, drain and the record (behind the
gateway, which refuses the path to everyone)."""
from __future__ import annotations

from typing import Any

from infra.stack.config import Deployment
from infra.targets.kubernetes import names
from infra.targets.contract import MetricsRead


# Read inside the engine container (the API server's exec, as `kubectl exec` does): the API server often cannot
# reach the pod network itself (its pod proxy), and the gateway refuses the path. Every engine image has python3.
READ = ("import sys, urllib.request as u; sys.stdout.write(u.urlopen('http://127.0.0.1:{port}{path}', "
        "timeout=5).read().decode())")


def engine_pods(d: Deployment) -> tuple[Any, list]:
    """(a CoreV1Api client of the stack's cluster, the engine's pods there): the serving pods, not the gateway's
    or a build Job's."""
    from kubernetes import client

    from infra.targets.kubernetes.names import selector_labels
    from infra.targets.kubernetes.rollout import api_client, kubeconfig_path

    t = d.target
    core = client.CoreV1Api(api_client(kubeconfig_path(t.kubeconfig), t.context))
    sel = ",".join(f"{k}={v}" for k, v in {**selector_labels(d), "app.kubernetes.io/component": "engine"}.items())
    return core, core.list_namespaced_pod(t.namespace, label_selector=sel).items


def engine_metrics(d: Deployment) -> list[MetricsRead]:
    """Each engine pod's /metrics read inside its container: in the cluster, never through the gateway."""
    from kubernetes.stream import stream

    from infra.targets.kubernetes.deploy import spec_for

    t, spec = d.target, spec_for(d)
    try:
        core, found = engine_pods(d)
        pods = [p for p in found if p.status.phase == "Running"]
    except Exception as e:  # noqa: BLE001  (unreachable, forbidden: said, not raised)
        return [MetricsRead(f"namespace {t.namespace}", None, f"not read: {type(e).__name__}")]
    if not pods and scaled_to_zero(d, core):
        return [MetricsRead(f"deployment {names.app_name(d)}", None, "scaled to zero (no engine pod): the next "
                            f"request with a key wakes one, held at the gateway up to {t.gateway.hold_s} s",
                            at_zero=True)]
    cmd = ["python3", "-c", READ.format(port=spec.listen_port, path=spec.metrics_path)]
    out = []
    for p in pods:
        source = f"pod {p.metadata.name}"
        try:
            text = stream(core.connect_get_namespaced_pod_exec, p.metadata.name, t.namespace, container="engine",
                          command=cmd, stderr=False, stdin=False, stdout=True, tty=False, _request_timeout=30)
            out.append(MetricsRead(source, str(text)))
        except Exception as e:  # noqa: BLE001
            why = str(getattr(e, "body", "") or e).replace("\n", " ")[:240]
            out.append(MetricsRead(source, None, f"GET {spec.metrics_path} inside the engine container failed: {why}"))
    return out


def scaled_to_zero(d: Deployment, core: Any) -> bool:
    """Whether KEDA took the engine's Deployment to zero replicas (a stack that may scale to zero only)."""
    from kubernetes import client

    a = d.target.autoscaling
    if a is None or not a.scale_to_zero:
        return False
    scale = client.AppsV1Api(core.api_client).read_namespaced_deployment_scale(names.app_name(d), d.target.namespace)
    return (scale.spec.replicas or 0) == 0
