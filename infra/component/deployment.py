"""Deployment: the engine on its target with its weight store, as one Pulumi ComponentResource.

One code path: a user's program constructs it with DeploymentArgs (Inputs from other resources), and the
stack-file program (infra.program) with the deployment its loader checked. The children of the latter keep
the names and URNs that earlier versions wrote (which had no Deployment above them) through aliases.
"""
from __future__ import annotations

from typing import Any

import pulumi

from infra.component.args import DeploymentArgs
from infra.component.prepare import prepare
from infra.component.prepared import Prepared
from infra.stack.secretfix import SecretField

TYPE = "inferry:index:Deployment"


class Deployment(pulumi.ComponentResource):
    """Serve a model on GPU machines (SSH hosts or a Kubernetes cluster) from a weight store."""

    endpoint: pulumi.Output[str]
    endpoints: pulumi.Output[list[str]]
    served_model: pulumi.Output[str]
    fits: pulumi.Output[bool]
    usd_per_hour: pulumi.Output[float]
    cpm_usd: pulumi.Output[float | None]
    weights: pulumi.Output[str]
    weights_bucket: pulumi.Output[str]
    weights_endpoint: pulumi.Output[str]

    def __init__(self, name: str, args: DeploymentArgs, opts: pulumi.ResourceOptions | None = None):
        """Check args (ConfigError with every problem), then create the weight store and the target."""
        from infra.checks import register_checks

        register_checks()
        # Checked before the component registers: a refused deployment leaves nothing behind.
        legacy = args.prepared is not None
        p = args.prepared if args.prepared is not None else prepare(args, f"Deployment {name}")
        for warning in [] if legacy else p.warnings:
            pulumi.log.warn(warning.render())
        super().__init__(TYPE, name, None, opts)
        self.exports = self._children(name, p, legacy)
        self._publish(p)

    def _children(self, name: str, p: Prepared, legacy: bool) -> dict[str, Any]:
        """The weight store, then the target; their exports as the stack-file program exports them."""
        from infra.storage.component import build_storage
        from infra.targets.contract import DeployRequest
        from infra.targets.registry import target_for

        d = p.deployment
        # The stack-file program's children were at the stack's root, by these names: the aliases map that state
        # onto their URNs under this component (no replacement); a user's component names them after itself.
        aliases = [pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE)] if legacy else None
        child = pulumi.ResourceOptions(parent=self, aliases=aliases)
        prefix = "" if legacy else f"{name}-"
        keys = {f: p.secrets[f] for f in (SecretField.S3_ACCESS, SecretField.S3_SECRET)}
        exports = build_storage(d, f"{prefix}weights", child, keys, p.late.fill)
        kind = d.target.kind
        req = DeployRequest(d, _checked(p.secrets), f"{prefix}{kind}", child, p.late.fill)
        return {**exports, **target_for(kind).deploy(req)}

    def _publish(self, p: Prepared) -> None:
        """The outputs: endpoints, the served model, the plan's figures, where the weights are."""
        from infra.sizing.plan import make_plan
        from infra.targets.registry import target_for

        d, e = p.deployment, self.exports
        plan = make_plan(d)
        spec = target_for(d.target.kind).service_spec(d)
        self.endpoint, self.endpoints = e["endpoint"], e["endpoints"]
        self.served_model = pulumi.Output.from_input(e.get("served_model") or spec.served_model_name or d.model.name)
        self.fits = pulumi.Output.from_input(plan.verdict.fits)
        self.usd_per_hour = pulumi.Output.from_input(plan.usd_per_hour)
        self.cpm_usd = pulumi.Output.from_input(plan.cpm_usd)
        self.weights = pulumi.Output.from_input(e["weights"])
        self.weights_bucket = e["weights_bucket"]
        self.weights_endpoint = pulumi.Output.from_input(e["weights_endpoint"])
        self.register_outputs({k: getattr(self, k) for k in OUTPUTS})


OUTPUTS = ("endpoint", "endpoints", "served_model", "fits", "usd_per_hour", "cpm_usd", "weights", "weights_bucket",
           "weights_endpoint")


def _checked(secrets: dict[str, Any]) -> dict[str, Any]:
    """The secret Outputs, the API key checked once known (a clean error, never its value; targets get it as is)."""
    from infra.errors import InferryError
    from infra.stack.secrets import checked_api_key

    def check(value: str) -> str:
        try:
            return checked_api_key(value)
        except InferryError as e:
            raise pulumi.RunError(e.render()) from None

    if SecretField.API_KEY not in secrets:
        return secrets
    return {**secrets, SecretField.API_KEY: pulumi.Output.from_input(secrets[SecretField.API_KEY]).apply(check)}
