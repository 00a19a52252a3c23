"""The engine's rollout, awaited by inferry: done when the Deployment is available, an error naming the reason
as soon as its pods cannot be scheduled, cannot pull their image or crash.

pulumi-kubernetes' own await only times out ("Minimum number of Pods ... was not attained") after the
Deployment's timeout, which must cover a model load: 40 minutes of silence for a pod no node can take.
So the Deployment is created with `pulumi.com/skipAwait` and this dynamic resource watches it.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider, UpdateResult

from infra.errors import InferryError, reported

FATAL_WAITING = ("ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CrashLoopBackOff",
                 "CreateContainerConfigError")
LOG_LINES = 10
INPUTS = ("kubeconfig", "context", "namespace", "name", "revision", "schedule_timeout_s", "startup_timeout_s",
          "floor", "settled")
FIELD_MANAGER = "inferry-rollout"


@dataclass(frozen=True)
class Watch:
    """What to wait for: the Deployment, and how long scheduling and the whole rollout may take."""

    kubeconfig: str
    context: str | None
    namespace: str
    name: str
    schedule_timeout_s: float
    startup_timeout_s: float
    floor: int = 0  # replicas a new Deployment starts with when an autoscaler owns the count (0: leave it)
    settled: bool = False  # also wait until no pod is terminating: an old pod drains, serving its old config
    poll_s: float = 2.0


def is_contents(kubeconfig: str) -> bool:
    """Whether a kubeconfig is the file's contents (an Output of the user's cluster), not its path: YAML has
    lines, and one line of JSON (pulumi_eks's kubeconfig_json) opens with a brace; pulumi-kubernetes takes both."""
    return "\n" in kubeconfig or kubeconfig.lstrip().startswith("{")


def kubeconfig_path(configured: str | None) -> str:
    """The kubeconfig file, named explicitly: the stack's, else $KUBECONFIG's first file, else ~/.kube/config."""
    path = configured or (os.environ.get("KUBECONFIG") or "").split(os.pathsep)[0] or "~/.kube/config"
    return os.path.expanduser(path)


def api_client(kubeconfig: str, context: str | None) -> Any:
    """A client of the cluster from the kubeconfig's contents or its file (~ expanded, as pulumi-kubernetes does).

    Contents that do not parse fail without their text: it holds the cluster's credentials."""
    import yaml
    from kubernetes import config

    if not is_contents(kubeconfig):
        return config.new_client_from_config(config_file=os.path.expanduser(kubeconfig), context=context)
    try:
        doc = yaml.safe_load(kubeconfig)
    except yaml.YAMLError:
        doc = None
    if not isinstance(doc, dict):
        raise InferryError("the kubeconfig's contents are not a kubeconfig (YAML or JSON)",
                           "give the cluster's kubeconfig, or a file's path", where="target.kubeconfig")
    return config.new_client_from_config_dict(doc, context=context)


def _apis(w: Watch) -> tuple[Any, Any]:
    from kubernetes import client

    api = api_client(w.kubeconfig, w.context)
    return client.AppsV1Api(api), client.CoreV1Api(api)


def available(dep: Any) -> bool:
    """The Deployment's current generation is rolled out and available: as `kubectl rollout status` has it, no
    pod of an older revision is left (with a surge, the old pods' readiness must not count)."""
    st, want = dep.status, dep.spec.replicas if dep.spec.replicas is not None else 1
    conditions = {c.type: c.status for c in st.conditions or []}
    updated = st.updated_replicas or 0
    return ((st.observed_generation or 0) >= dep.metadata.generation and conditions.get("Available") == "True"
            and updated >= want and (st.replicas or 0) <= updated and (st.available_replicas or 0) >= want
            and (st.ready_replicas or 0) >= want)


def terminating(pods: list[Any]) -> list[str]:
    """The pods still stopping: each keeps serving through its drain (context.DRAIN), so a Service may still
    route a request to the old revision for that long after the Deployment counts as rolled out."""
    return [p.metadata.name for p in pods if p.metadata.deletion_timestamp is not None]


def stuck(pods: list[Any]) -> tuple[str, str, tuple[str, str] | None] | None:
    """(kind, message, (pod, container) that crash-loops) of the first pod that cannot become ready:
    unschedulable, or a fatal container state."""
    for p in pods:
        for c in p.status.conditions or []:
            if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
                return "schedule", f"pod {p.metadata.name} cannot be scheduled: {c.message}", None
        for cs in (p.status.init_container_statuses or []) + (p.status.container_statuses or []):
            waiting = cs.state.waiting if cs.state else None
            if waiting and waiting.reason in FATAL_WAITING:
                crashed = (p.metadata.name, cs.name) if waiting.reason == "CrashLoopBackOff" else None
                return ("container", f"pod {p.metadata.name}, container {cs.name}: {waiting.reason}: "
                        f"{waiting.message or ''}", crashed)
    return None


def last_lines(core: Any, namespace: str, crashed: tuple[str, str] | None, lines: int = LOG_LINES) -> str:
    """The crashed container's last log lines (its previous run), indented; empty when none can be read."""
    if crashed is None:
        return ""
    try:
        text = core.read_namespaced_pod_log(crashed[0], namespace, container=crashed[1], previous=True,
                                            tail_lines=lines)
    except Exception:  # noqa: BLE001  (the reason stands without its log; a log is not always kept)
        return ""
    body = "\n".join(f"    {line}" for line in (text or "").rstrip().splitlines())
    return f"\n  its last log lines:\n{body}" if body else ""


def start_at_floor(apps: Any, w: Watch) -> None:
    """Scale the Deployment up to w.floor when it has fewer replicas.

    With an autoscaler the Deployment leaves `replicas` out, so that `pulumi up` never fights it: a new one
    starts at the API server's default of 1 (and one that had a fixed count falls back to 1 when the autoscaler
    is added), and with no autoscaler running yet, min_replicas would never be reached. So inferry sets the
    count once, through the scale subresource as an autoscaler does: no apply of inferry's owns the field, the
    autoscaler's later writes win, and the next `up`'s apply leaves the count alone.
    """
    have = apps.read_namespaced_deployment_scale(w.name, w.namespace).spec.replicas or 0
    if have < w.floor:
        apps.patch_namespaced_deployment_scale(w.name, w.namespace, {"spec": {"replicas": w.floor}},
                                               field_manager=FIELD_MANAGER)


def wait(w: Watch, clock=time.monotonic, floor: bool = False) -> None:
    """Return when the rollout is available; InferryError with the reason otherwise (bounded). With floor, the
    Deployment is first brought to w.floor replicas (start_at_floor)."""
    apps, core = _apis(w)
    if floor and w.floor > 0:
        start_at_floor(apps, w)
    start, unschedulable_since = clock(), None
    while True:
        dep = apps.read_namespaced_deployment(w.name, w.namespace)
        selector = ",".join(f"{k}={v}" for k, v in (dep.spec.selector.match_labels or {}).items())
        pods = core.list_namespaced_pod(w.namespace, label_selector=selector).items
        if available(dep) and not (w.settled and terminating(pods)):
            return
        found = stuck(pods)
        now = clock()
        if found and found[0] == "container":
            raise _error(w, found[1] + last_lines(core, w.namespace, found[2]),
                         "fix the image (engine.image) or the engine's options shown above")
        unschedulable_since = (unschedulable_since or now) if found else None
        if found and now - unschedulable_since > w.schedule_timeout_s:
            raise _error(w, found[1], "ask for fewer GPUs per replica (engine.tensor_parallel_size, "
                         "pipeline_parallel_size), or add nodes that have them (target.gpu_product, "
                         "node_selector and tolerations must match them); or raise target.schedule_timeout_s "
                         "when a cluster autoscaler adds GPU nodes slowly")
        if now - start > w.startup_timeout_s:
            why = f": {found[1]}" if found else ""  # e.g. a replica the scheduler could not place yet
            raise _error(w, f"not available after {w.startup_timeout_s:g}s{why}", "see `kubectl describe deployment "
                         f"{w.name} -n {w.namespace}`; raise target.startup_timeout_s for a slow model load")
        time.sleep(w.poll_s)


def _error(w: Watch, what: str, fix: str) -> InferryError:
    return InferryError(f"deployment {w.name} did not roll out: {what}", fix, where=f"namespace {w.namespace}")


class RolloutProvider(ResourceProvider):
    """A dynamic resource whose create/update wait for the rollout of its revision of the Deployment."""

    @reported
    def create(self, props: dict[str, Any]) -> CreateResult:
        """Bring the new Deployment to its floor of replicas, then wait for its rollout."""
        wait(_watch(props), floor=True)
        return CreateResult(f"{props['namespace']}/{props['name']}", {k: props.get(k) for k in INPUTS})

    @reported
    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """A new revision of the Deployment (or other timeouts) is waited for again."""
        changed = [k for k in INPUTS if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(changed), replaces=[], stables=[], delete_before_replace=False)

    @reported
    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        """Wait for the new revision's rollout; when an autoscaler was just added, start it at its floor first."""
        wait(_watch(news), floor=not olds.get("floor"))
        return UpdateResult({k: news.get(k) for k in INPUTS})


def _watch(p: dict[str, Any]) -> Watch:
    return Watch(str(p["kubeconfig"]), p.get("context") or None, str(p["namespace"]), str(p["name"]),
                 float(p["schedule_timeout_s"]), float(p["startup_timeout_s"]), int(p.get("floor") or 0),
                 bool(p.get("settled")))
