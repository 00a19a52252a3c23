"""SshTarget: the ComponentResource that puts the engine on SSH hosts (children: one dynamic step each)."""
from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import Resource

from infra.stack.secretfix import SecretField
from infra.targets.contract import DeployRequest, TargetArgs
from infra.targets.ssh.args import props_of
from infra.targets.ssh.plan import plan as make_plan
from infra.targets.ssh.providers import GatewayProvider, HostProvider, ServiceProvider, WeightsProvider
from infra.targets.ssh.rollout import ROLLING

PRIVATE_KEY = SecretField.PRIVATE_KEY


class HostStep(Resource, module="inferry", name="SshHost"):
    """Facts, preflight and prerequisites on one host."""

    def __init__(self, name: str, props: dict, opts: pulumi.ResourceOptions):
        super().__init__(HostProvider(), name, {**props, "os": None, "gpus": None, "driver": None}, opts)


class WeightsStep(Resource, module="inferry", name="SshWeights"):
    """The model's weights in one host's cache."""

    manifest_sha256: pulumi.Output[str]

    def __init__(self, name: str, props: dict, opts: pulumi.ResourceOptions):
        super().__init__(WeightsProvider(), name, {"manifest_sha256": None, "model_dir": None, **props}, opts)


class ServiceStep(Resource, module="inferry", name="SshService"):
    """The engine service on one host, healthy."""

    endpoint: pulumi.Output[str]

    def __init__(self, name: str, props: dict, opts: pulumi.ResourceOptions):
        super().__init__(ServiceProvider(), name, {**props, "endpoint": None}, opts)


class GatewayStep(Resource, module="inferry", name="SshGateway"):
    """Caddy in front of every replica: the one public door."""

    endpoint: pulumi.Output[str]

    def __init__(self, name: str, props: dict, opts: pulumi.ResourceOptions):
        super().__init__(GatewayProvider(), name, {**props, "endpoint": None, "config_sha256": None}, opts)


def _joined(digests: list) -> str:
    return " ".join(x or "" for x in digests)


def _edge_checked(values: dict) -> dict:
    """The secret values, the gateway's keys checked before any step runs (nothing is half-applied)."""
    from infra.errors import InferryError
    from infra.targets.ssh.gateway import gateway_secrets

    try:
        gateway_secrets(values)
    except InferryError as e:
        raise pulumi.RunError(e.render()) from None
    return values


class SshTarget(pulumi.ComponentResource):
    """Every host a healthy replica; outputs endpoint (the gateway or the first replica), endpoints and model."""

    endpoint: pulumi.Output[str]
    endpoints: pulumi.Output[list]
    model: str

    def __init__(self, name: str, args: TargetArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("inferry:ssh:Target", name, None, opts)
        plan = make_plan(args.deployment, args.spec)
        sec, fill = args.secrets, args.fill
        common = {"private_key": sec[PRIVATE_KEY], "max_parallel": plan.max_parallel,
                  "private_key_ref": args.deployment.target.private_key.model_dump(exclude_none=True)}
        secret_values = pulumi.Output.all(**{f: sec[f] for f in plan.secret_fields if f in sec})
        if plan.gateway is not None:
            secret_values = secret_values.apply(_edge_checked)
        secret_values = pulumi.Output.secret(secret_values)
        services, read = [], args.deployment.storage.serving_key_fields
        for hp in plan.hosts:
            base = f"{name}-{hp.label}"
            host = HostStep(f"{base}-host", fill({**props_of(hp.host), **common}), pulumi.ResourceOptions(parent=self))
            svc = props_of(hp.service)
            after: list[pulumi.Resource] = [host]
            for i, wa in enumerate(hp.weights):  # it only reads (presigned GETs): the read-only pair when named
                after.append(WeightsStep(f"{base}-weights" + (f"-{i}" if i else ""),
                                         fill({**props_of(wa), **common, "access_key_id": sec[read[0]],
                                               "secret_access_key": sec[read[1]]}),
                                         pulumi.ResourceOptions(parent=self, depends_on=[host])))
            digests = [w.manifest_sha256 for w in after[1:]]
            svc["depends"] = pulumi.Output.all(*digests).apply(_joined) if digests else ""
            svc.update(common, secret_values=secret_values)
            # Rolling is coordinated in the provider process (rollout.py), not by a chain of hosts: every host is
            # read, checked and first started at once, and only a serving engine about to restart waits its turn.
            svc[ROLLING] = plan.batch if plan.rolling else 0  # how many engines may restart at once
            services.append(ServiceStep(f"{base}-service", fill(svc),
                                        pulumi.ResourceOptions(parent=self, depends_on=after)))
        self.endpoints = pulumi.Output.all(*[s.endpoint for s in services])
        self.endpoint = self.endpoints.apply(lambda e: e[0] if e else "")
        if plan.gateway is not None:
            gw = GatewayStep(f"{name}-gateway", fill({**props_of(plan.gateway), **common,
                                                      "secret_values": secret_values}),
                             pulumi.ResourceOptions(parent=self, depends_on=services))
            # The replicas listen on loopback or a private address: the gateway is the one endpoint there is.
            self.endpoint = gw.endpoint
            self.endpoints = pulumi.Output.all(gw.endpoint)
        self.model = args.deployment.model.name
        self.register_outputs({"endpoint": self.endpoint, "endpoints": self.endpoints, "model": self.model})


def deploy(req: DeployRequest) -> dict[str, Any]:
    """The deployment's SSH target; returns its exports (endpoint, endpoints)."""
    from infra.targets.ssh.render import ssh_spec

    d = req.deployment
    t = SshTarget(req.name, TargetArgs(d, ssh_spec(d), req.secrets, req.fill), req.opts)
    return {"endpoint": t.endpoint, "endpoints": t.endpoints}
