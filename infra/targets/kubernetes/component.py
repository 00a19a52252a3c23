"""KubernetesTarget: the engine of a ServiceSpec on a Kubernetes cluster, as one Pulumi ComponentResource."""
from __future__ import annotations

from typing import Any

import pulumi
import pulumi.dynamic
import pulumi_kubernetes as k8s

from infra.stack.secretfix import SecretField
from infra.errors import InferryError
from infra.targets.kubernetes import build, gateway, pod, scaling, weights
from infra.targets.contract import TargetArgs

# Pod Security admission on the namespace inferry makes: baseline enforced (no privileged pods, host namespaces or
# host paths), what restricted would refuse audited (the engines' images run as root, which restricted refuses).
POD_SECURITY = {"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/audit": "restricted"}
from infra.targets.kubernetes.context import Ctx
from infra.targets.kubernetes.rollout import RolloutProvider, kubeconfig_path

TYPE = "inferry:targets:KubernetesTarget"


class Rollout(pulumi.dynamic.Resource, module="inferry", name="Rollout"):
    """Waits for a revision of the engine's Deployment to be available (infra/targets/kubernetes/rollout.py)."""

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions):
        super().__init__(RolloutProvider(), name, props, opts)
S3_FIELDS = (SecretField.S3_ACCESS, SecretField.S3_SECRET)


def _edge_key(value: Any, field: str) -> Any:
    """A key the gateway will accept, checked for the edge (128 bits): `up` stops here, naming the field, before
    the gateway's config is written. Offline render passes placeholder text, not a key: only an Output (the
    program's resolved secret) is checked."""
    from infra.errors import InferryError
    from infra.stack.secrets import checked_edge_key

    def checked(v: str) -> str:
        try:
            return checked_edge_key(v, field)
        except InferryError as e:
            raise pulumi.RunError(e.render()) from None

    return value.apply(checked) if isinstance(value, pulumi.Output) else value


def _cluster_ip(spec: Any) -> str | None:
    """A Service's cluster IP (a typed spec, or a dict under mocks, which have none)."""
    ip = getattr(spec, "cluster_ip", None) if hasattr(spec, "cluster_ip") else (spec or {}).get("clusterIP")
    return ip if ip and ip != "None" else None


def _generation(meta: Any) -> Any:
    """metadata.generation of an applied object (a typed ObjectMeta, or a dict under mocks)."""
    return meta.get("generation") if isinstance(meta, dict) else getattr(meta, "generation", None)


def needed_secrets(ctx: Ctx, have: dict[str, Any]) -> dict[str, Any]:
    """The secret values the pods reference (S3 keys when they fetch, and every secret env of the spec)."""
    fields = [e.secret_field for e in ctx.spec.secret_env() if e.secret_field]
    if ctx.spec.needs_auth_proxy and ctx.t.gateway is None:  # behind the gateway its proxy checks no key
        fields.append(SecretField.API_KEY)
    if ctx.wants_weights_volume:
        fields += list(ctx.d.storage.serving_key_fields)  # the read-only pair when the stack names one
    if ctx.spec.build is not None:  # the build Job fetches, then pushes the engine it built
        fields += list(ctx.d.storage.serving_key_fields) + list(S3_FIELDS)
    missing = sorted({f for f in fields if f not in have})
    if missing:
        raise InferryError(f"no secret value for {', '.join(missing)}",
                           "reference it in the stack file ({config: KEY} or {env: VAR})", where="target")
    return {f: have[f] for f in sorted(set(fields))}


class KubernetesTarget(pulumi.ComponentResource):
    """Namespace, Secret, ConfigMap, Deployment, Service; optional Ingress, PDB, autoscaler, monitor, build Job."""

    endpoint: pulumi.Output[str]
    model: pulumi.Output[str]
    endpoints: pulumi.Output[list[str]]

    def __init__(self, name: str, args: TargetArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        ctx = Ctx(args.deployment, args.spec)
        self._ctx = ctx
        self.objects: dict[str, pulumi.Resource] = {}  # role -> child, for inspection
        self.waits_for: dict[str, tuple[str, ...]] = {}  # role -> roles it depends on
        self._fill = args.fill
        provider = k8s.Provider(f"{name}-provider", **args.fill({"kubeconfig": kubeconfig_path(ctx.t.kubeconfig),
                                                                 "context": ctx.t.context}),
                                opts=pulumi.ResourceOptions(parent=self))
        self._opts = pulumi.ResourceOptions(parent=self, provider=provider)
        ns = self._namespace()
        base = ns + [self._secret(needed_secrets(ctx, dict(args.secrets)), ns), self._config(ns)]
        if ctx.t.weights_delivery in ("pvc", "node-cache") and ctx.wants_weights_volume:
            base += self._weights_claim(base)
        if ctx.spec.build is not None:
            base.append(self._build_job(base))
        deployment = self._deployment(base)
        # After the rollout: pulumi-kubernetes awaits a Service's ready endpoints for 10 minutes, which held a
        # failed rollout's `up` that long on a real node (its pods exist but never become ready).
        service = self._make(k8s.core.v1.Service, "service", base + [deployment],
                             metadata=ctx.meta(ctx.name, "engine"), spec=scaling.service_spec(ctx))
        if ctx.t.gateway is not None:
            self._gateway(base + [service], dict(args.secrets), service)
        self._extras(base + [deployment, service])
        url = self._url()
        self.endpoint = pulumi.Output.all(deployment.id, service.id).apply(lambda _: url)
        self.model = pulumi.Output.from_input(ctx.spec.served_model_name or ctx.d.model.name)
        self.endpoints = self.endpoint.apply(lambda u: [u])
        self.register_outputs({"endpoint": self.endpoint, "model": self.model, "endpoints": self.endpoints})

    def _make(self, cls: Any, suffix: str, deps: list, **kwargs: Any) -> Any:
        opts = pulumi.ResourceOptions.merge(self._opts, pulumi.ResourceOptions(depends_on=deps))
        if "custom_timeouts" in kwargs:
            timeouts = pulumi.ResourceOptions(custom_timeouts=kwargs.pop("custom_timeouts"))
            opts = pulumi.ResourceOptions.merge(opts, timeouts)
        resource = cls(f"{self._ctx.name}-{suffix}", opts=opts, **kwargs)
        roles = {id(r): role for role, r in self.objects.items()}
        self.waits_for[suffix] = tuple(roles[id(d)] for d in deps)
        self.objects[suffix] = resource
        return resource

    def _namespace(self) -> list:
        if not self._ctx.t.create_namespace:
            return []  # an existing namespace: referenced by name only
        labels = {k: v for k, v in self._ctx.labels("namespace").items() if "instance" not in k}
        labels.update(POD_SECURITY)
        return [self._make(k8s.core.v1.Namespace, "namespace", [], metadata={"name": self._ctx.ns, "labels": labels})]

    def _weights_claim(self, deps: list) -> list:
        """The weights PVC; with node-cache, first the local volume it binds (cluster-wide: no namespace)."""
        ctx, volume = self._ctx, []
        if weights.node_cached(ctx):
            meta = {"name": weights.pv_name(ctx), "labels": ctx.labels("weights")}
            volume = [self._make(k8s.core.v1.PersistentVolume, "node-cache", deps, metadata=meta,
                                 spec=weights.pv_spec(ctx))]
        return [self._make(k8s.core.v1.PersistentVolumeClaim, "weights", deps + volume,
                           metadata=ctx.meta(weights.pvc_name(ctx), "weights"), spec=weights.pvc_spec(ctx))]

    def _secret(self, values: dict[str, Any], deps: list) -> Any:
        return self._make(k8s.core.v1.Secret, "secrets", deps, type="Opaque",
                          metadata=self._ctx.meta(self._ctx.secret_name, "secrets"),
                          string_data={k: pulumi.Output.secret(v) for k, v in values.items()})

    def _config(self, deps: list) -> Any:
        data = pod.config_data(self._ctx)
        self._digest = pod.digest(data)
        return self._make(k8s.core.v1.ConfigMap, "config", deps,
                          metadata=self._ctx.meta(self._ctx.config_name, "config"), data=data)

    def _build_job(self, deps: list) -> Any:
        ctx = self._ctx
        env = [pod.env_entry(ctx, e) for e in ctx.spec.env]  # e.g. HF_TOKEN for the calibration data set
        return self._make(k8s.batch.v1.Job, "build", deps, metadata=ctx.meta(build.build_job_name(ctx), "engine-build"),
                          spec=build.build_job_spec(ctx, pod.pod_common(ctx), env),
                          custom_timeouts=pulumi.CustomTimeouts(create="4h", update="4h"))

    def _deployment(self, deps: list) -> Any:
        """The Deployment, then its rollout awaited by inferry (rollout.py says why not by pulumi-kubernetes)."""
        ctx = self._ctx
        meta = ctx.meta(ctx.name, "engine", annotations={"pulumi.com/skipAwait": "true"})
        deployment = self._make(k8s.apps.v1.Deployment, "deployment", deps, metadata=meta,
                                spec=pod.deployment_spec(ctx, self._digest))
        floor = max(1, ctx.t.autoscaling.min_replicas) if ctx.t.autoscaling else 0
        return self._await(deployment, ctx.name, "rollout", "deployment", floor)

    def _await(self, deployment: Any, name: str, role: str, of: str, floor: int, settled: bool = False) -> Any:
        """inferry's wait for a Deployment's rollout (rollout.py), with its reasons when it cannot finish."""
        ctx = self._ctx
        props = {"kubeconfig": kubeconfig_path(ctx.t.kubeconfig), "context": ctx.t.context, "namespace": ctx.ns,
                 "name": name, "revision": deployment.metadata.apply(_generation),
                 "schedule_timeout_s": ctx.t.schedule_timeout_s, "startup_timeout_s": ctx.t.startup_timeout_s,
                 "floor": floor, "settled": settled}
        suffix = role.removesuffix("rollout").rstrip("-")
        rollout = Rollout(f"{ctx.name}-{suffix + '-' if suffix else ''}rollout", self._fill(props),
                          pulumi.ResourceOptions(parent=self, depends_on=[deployment]))
        self.objects[role], self.waits_for[role] = rollout, (of,)
        return rollout

    def _gateway(self, deps: list, secrets: dict[str, Any], engine_service: Any) -> None:
        """Caddy in front of the engine's Service: its config (keys in it) in a Secret, its Deployment, Service."""
        ctx = self._ctx
        fields = [f for f in (SecretField.API_KEY, SecretField.PREVIOUS_API_KEY) if f in secrets]
        ip = engine_service.spec.apply(lambda sp: _cluster_ip(sp))
        keys = pulumi.Output.all(ip, *(_edge_key(secrets[f], f) for f in fields))
        conf = keys.apply(lambda v: gateway.config_text(ctx, tuple(v[1:]), v[0]))
        rolls = pulumi.Output.unsecret(keys.apply(lambda v: gateway.config_hash(ctx, tuple(v[1:]), v[0])))
        meta = ctx.meta(gateway.gateway_name(ctx), "gateway")
        # Named by its content: a new config is a new Secret, made before the pods move to it and the old one goes.
        secret = self._make(k8s.core.v1.Secret, "gateway-config", deps, type="Opaque",
                            metadata=rolls.apply(lambda h: {**meta, "name": gateway.secret_name(ctx, h)}),
                            string_data={gateway.CONF: pulumi.Output.secret(conf)})
        meta_await = {**meta, "annotations": {"pulumi.com/skipAwait": "true"}}  # awaited below, as the engine's
        pods = self._make(k8s.apps.v1.Deployment, "gateway", deps + [secret], metadata=meta_await,
                          spec=rolls.apply(lambda h: gateway.deployment_spec(ctx, h)))
        # `up` returns once only gateway pods with the new config are left, the draining old ones gone too: a
        # client may move to a new key right after (seen on the real node: a 401 from an old pod still draining).
        pods = self._await(pods, gateway.gateway_name(ctx), "gateway-rollout", "gateway", 0, settled=True)
        self._make(k8s.core.v1.Service, "gateway-service", deps + [pods], metadata=meta,
                   spec=gateway.service_spec(ctx))
        self._make(k8s.networking.v1.NetworkPolicy, "engine-policy", deps, metadata=ctx.meta(ctx.name, "engine"),
                   spec=gateway.network_policy_spec(ctx))
        self._make(k8s.networking.v1.NetworkPolicy, "gateway-policy", deps, metadata=meta,
                   spec=gateway.gateway_policy_spec(ctx))

    def _extras(self, deps: list) -> None:
        ctx, t = self._ctx, self._ctx.t
        backend, port = (gateway.gateway_name(ctx), 80) if t.gateway is not None else (ctx.name, ctx.spec.port)
        if t.autoscaling is not None and t.autoscaling.engine == "keda":
            self._custom("scaledobject", scaling.KEDA_API, "ScaledObject", ctx.name,
                         scaling.scaled_object_spec(ctx), deps)
        elif t.autoscaling is not None:
            self._make(k8s.autoscaling.v2.HorizontalPodAutoscaler, "hpa", deps,
                       metadata=ctx.meta(ctx.name, "autoscaler"), spec=scaling.hpa_spec(ctx))
        if t.ingress is not None:
            # An Ingress gets an address only from a controller that publishes one (many never do), and
            # pulumi-kubernetes would wait 10 minutes for it: the Deployment and Service are awaited instead.
            meta = ctx.meta(ctx.name, "ingress")
            meta["annotations"] = {**meta.get("annotations", {}), "pulumi.com/skipAwait": "true"}
            self._make(k8s.networking.v1.Ingress, "ingress", deps, metadata=meta,
                       spec=scaling.ingress_spec(ctx, backend, port))
        if t.pdb_min_available is not None:
            self._make(k8s.policy.v1.PodDisruptionBudget, "pdb", deps, metadata=ctx.meta(ctx.name, "engine"),
                       spec=scaling.pdb_spec(ctx))
        if t.service_monitor:
            self._custom("servicemonitor", scaling.MONITOR_API, "ServiceMonitor", ctx.name,
                         scaling.service_monitor_spec(ctx), deps)
        if t.gateway is not None and (t.service_monitor or ctx.scales_to_zero):  # scale to zero wakes on it
            self._custom("gateway-monitor", scaling.MONITOR_API, "ServiceMonitor", gateway.gateway_name(ctx),
                         scaling.gateway_monitor_spec(ctx), deps)

    def _custom(self, suffix: str, api: str, kind: str, obj_name: str, spec: dict, deps: list) -> Any:
        return self._make(k8s.apiextensions.CustomResource, suffix, deps, api_version=api, kind=kind,
                          metadata=self._ctx.meta(obj_name, "autoscaler" if kind != "ServiceMonitor" else "monitor"),
                          spec=spec)

    def _url(self) -> str:
        ctx = self._ctx
        if ctx.t.ingress is not None:
            scheme = "https" if ctx.t.ingress.tls_secret else "http"
            return f"{scheme}://{ctx.t.ingress.host}"
        if ctx.t.gateway is not None:
            return f"http://{gateway.gateway_name(ctx)}.{ctx.ns}.svc.cluster.local"
        return f"http://{ctx.name}.{ctx.ns}.svc.cluster.local:{ctx.spec.port}"
