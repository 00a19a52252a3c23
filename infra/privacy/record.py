"""`inferry record`: the record of processing, built from the stack and read back from the running deployment."""
from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infra.errors import Problem
from infra.gateway.caddy import utc_text
from infra.privacy.subprocessors import SubProcessor, check_sub_processors, sub_processors
from infra.stack.checks import check_residency
from infra.stack.config import Deployment
from infra.stack.regions import in_eu
from infra.targets.contract import Door, ReplicaFacts

if TYPE_CHECKING:
    from infra.stack.stackfile import Stack


@dataclass(frozen=True)
class Record:
    """What a reviewer asks: where it runs, what it keeps, what leaves, who takes part, who can call it."""

    stack: str
    read_at: str  # UTC, when the deployment was read
    provider: str
    region: str
    target: str  # the target's summary ("2 ssh host(s)")
    replicas: tuple[ReplicaFacts, ...]
    store: dict[str, str]  # endpoint, region, bucket, weights prefix
    door: Door
    telemetry_off: dict[str, str]  # the switches every engine must run with, and their values
    log_prompts: bool  # serving.log_prompts: the engine may log prompts and outputs
    prompt_flags: tuple[str, ...]  # the engine's options that log prompts or outputs
    sub_processors: tuple[SubProcessor, ...]
    residency: str | None
    allowed_sub_processors: tuple[str, ...] | None

    def as_json(self) -> dict[str, Any]:
        """The record as plain data (`inferry record --json`)."""
        return dataclasses.asdict(self)


def prompt_flags(d: Deployment) -> tuple[str, ...]:
    """The engine's command-line options that log prompts or outputs (its argparse dests as flags)."""
    from infra.engines.registry import engine_for

    return tuple("--" + dest.replace("_", "-") for dest in engine_for(d.engine.kind).prompt_logging)


def build_record(stack: "Stack", replicas: list[ReplicaFacts], now: dt.datetime | None = None) -> Record:
    """The record of STACK with what its replicas said of themselves."""
    from infra.engines.registry import expected_switches
    from infra.targets.registry import target_for

    d = stack.deployment
    target = target_for(d.target.kind)
    store = {"endpoint": d.storage.endpoint, "region": d.storage.region, "bucket": d.storage.bucket,
             "weights": d.model.weights}
    when = utc_text(now)
    allowed = d.policy.sub_processors
    return Record(stack.name, when, d.provider.name, d.provider.region, target.summary(d), tuple(replicas), store,
                  target.door(d), expected_switches(d), d.serving.log_prompts,
                  prompt_flags(d), tuple(sub_processors(d)), d.policy.residency,
                  None if allowed is None else tuple(allowed))


def read_record(stack: "Stack") -> Record:
    """Read every replica now and build the record."""
    from infra.lifecycle.secrets import resolver
    from infra.targets.registry import target_for

    facts = target_for(stack.deployment.target.kind).replica_facts(stack, resolver(stack))
    return build_record(stack, facts)


def replica_differences(d: Deployment, r: Record, f: ReplicaFacts) -> list[Problem]:
    """What one replica runs that the stack's policy does not allow."""
    if f.error:
        return [Problem(f.source, f"could not be checked: {f.error}", hint="bring it up, then run the check again")]
    out = [Problem(f.source, f"the engine runs without {name}={value}, which keeps it from reporting out",
                   repr(f.env[name]) if name in f.env else "unset", hint="run `inferry up` to start it as rendered")
           for name, value in r.telemetry_off.items() if f.env.get(name) != value]
    if not r.log_prompts:
        out += [Problem(f.source, f"the engine runs with {flag}, which logs prompts or outputs, but "
                        "serving.log_prompts is false", hint="run `inferry up` to start it as rendered, or set "
                        "serving.log_prompts: true if logging them is agreed (the record then says so)")
                for flag in r.prompt_flags if flag in f.flags]
    region = f.place.get("region")
    if region and r.residency == "eu" and in_eu(region, d.policy.allowed_regions) is not True:
        out.append(Problem(f.source, "runs on a node outside the EU (or a region inferry cannot place) but "
                           "policy.residency is 'eu'", repr(region), hint="schedule it onto EU nodes "
                           "(target.node_selector) or list the region in policy.allowed_regions"))
    return out


def differences(d: Deployment, r: Record) -> list[Problem]:
    """Every difference between what runs and the stack's policy (`inferry record --check`)."""
    problems = check_residency(d) + check_sub_processors(d)
    for f in r.replicas:
        problems += replica_differences(d, r, f)
    return problems

