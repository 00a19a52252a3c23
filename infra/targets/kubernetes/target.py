"""The Kubernetes target's descriptor: one Deployment (and friends) on a cluster (infra.targets.contract)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from infra.errors import Problem
from infra.stack.config import Deployment
from infra.targets.kubernetes.config import KubernetesTarget as Section
from infra.targets.contract import DeployRequest, Door, MetricsRead, ReplicaFacts, Resolve, Source

if TYPE_CHECKING:
    from infra.engines.spec import ServiceSpec
    from infra.render.out import Placed
    from infra.stack.stackfile import Stack


# The `target:` lines `inferry init` writes (unindented YAML, commented).
STARTER = """\
kind: kubernetes
context: my-cluster                    # kubeconfig context; never the ambient default
namespace: inferry
replicas: 1
weights_delivery: init-container       # init-container | pvc | node-cache | stream (vLLM runai_streamer)
gateway: {}                            # Caddy pods in front of the engines: keys and the allowlist at the edge
"""


def _section(d: Deployment) -> Section:
    assert isinstance(d.target, Section)
    return d.target


class Kubernetes:
    """A cluster through pulumi-kubernetes: weights, the engine Deployment, Service, scaling, ingress."""

    kind = "kubernetes"
    config = Section
    starter = STARTER

    def deploy(self, req: DeployRequest) -> dict[str, Any]:
        """The KubernetesTarget component of the deployment; returns endpoint, endpoints and served_model."""
        from infra.targets.kubernetes.deploy import deploy

        return deploy(req)

    def checks(self, d: Deployment) -> list[Problem]:
        """Scaling, weight delivery and cluster settings the schema cannot see."""
        from infra.targets.kubernetes.checks import check_kubernetes

        return check_kubernetes(d)

    def service_spec(self, d: Deployment) -> "ServiceSpec":
        """Container paths, exactly as the SSH target's docker runtime runs it."""
        from infra.targets.kubernetes.deploy import spec_for

        return spec_for(d)

    def placements(self, stack: "Stack") -> list["Placed"]:
        """Every manifest, applied to the cluster in file-name order."""
        from infra.render.out import Placed
        from infra.targets.kubernetes.manifests import render_kubernetes

        t = _section(stack.deployment)
        where = f"cluster {t.context or '(no context)'}, namespace {t.namespace}"
        return [Placed(name, text, 0o644, (where,), f"kubectl apply -f {name}")
                for name, text in sorted(render_kubernetes(stack).items())]

    def summary(self, d: Deployment) -> str:
        """'kubernetes ns NAMESPACE'."""
        return f"kubernetes ns {_section(d).namespace}"

    def replicas_behind(self, d: Deployment) -> int:
        """The Service spreads over every replica (at least one: scale to zero wakes one)."""
        return max(_section(d).replicas, 1)

    def host_status(self, stack: "Stack", resolve: Resolve) -> list[str]:
        """Nothing: the cluster's pods are the rollout watch's to report."""
        return []

    def engine_metrics(self, stack: "Stack", resolve: Resolve) -> list[MetricsRead] | None:
        """Behind the gateway, each engine pod's /metrics through the API server's pod proxy; without one, None:
        the Service serves /metrics (status and drain read the endpoint)."""
        from infra.targets.kubernetes.inside import engine_metrics

        return engine_metrics(stack.deployment) if _section(stack.deployment).gateway is not None else None

    def run_time_sources(self, d: Deployment) -> list[Source]:
        """The images the pods pull."""
        from infra.targets.kubernetes.record import run_time_sources

        return run_time_sources(d)

    def door(self, d: Deployment) -> Door:
        """The Ingress (TLS from its Secret), or the in-cluster Service."""
        from infra.targets.kubernetes.record import door

        return door(d)

    def replica_facts(self, stack: "Stack", resolve: Resolve) -> list[ReplicaFacts]:
        """Each serving pod from the API server: its node's region, zone and GPUs, the engine's switches."""
        from infra.targets.kubernetes.record import replica_facts

        return replica_facts(stack.deployment)


TARGET = Kubernetes()
