"""`inferry preview|up|destroy|outputs|migrate|status|bench`: a stack's lifecycle."""
from __future__ import annotations

import json
from pathlib import Path

import typer

from cli.common import check_adapters, confirm, handle_errors, load_checked, out
from infra.errors import InferryError
from infra.lifecycle.deployer import Deployer, endpoints
from infra.stack.stackfile import Stack, load_stack

STACK_HELP = "a stack name under stacks/ (e.g. eu-ssh) or a path to a stack file"


def make_deployer() -> Deployer:
    """The Deployer commands use (tests replace this function)."""
    from infra.lifecycle.automation import AutomationDeployer
    from infra.program import main

    return AutomationDeployer(main)


def make_weights():
    """The WeightMover `migrate` uses (tests replace this function)."""
    from infra.lifecycle.weights import StoreWeights

    return StoreWeights()


def say(line: str) -> None:
    """One progress line, as is (no rich markup: lines carry user text)."""
    out.print(line, markup=False)


@handle_errors
def preview(stack: str = typer.Argument(..., help=STACK_HELP)) -> None:
    """Show what `inferry up` would change."""
    s = load_checked(stack)
    deployer = make_deployer()
    deployer.check(s)  # a missing Pulumi CLI is said before any progress line
    say(f"previewing {s.name}")
    changes = deployer.preview(s, say)
    say(f"{s.name} would change: {changes.line()}")


@handle_errors
def up(stack: str = typer.Argument(..., help=STACK_HELP),
       verify_weights: bool = typer.Option(False, "--verify-weights", help="SSH hosts: hash every cached weight "
                                           "file again (sha256) and fetch what differs; each up checks sizes")) -> None:
    """Create or update the stack (same as `pulumi up --stack NAME` in the project folder)."""
    import os

    from infra.targets.ssh.providers import VERIFY_WEIGHTS

    if verify_weights:  # the dynamic-provider plugin inherits the environment through the Pulumi CLI
        os.environ[VERIFY_WEIGHTS] = "1"
    s = load_checked(stack)
    check_adapters(s)  # before anything is created: a wrong adapter would fail only on the engine's first load
    deployer = make_deployer()
    deployer.check(s)
    say(f"updating {s.name}")
    outputs = deployer.up(s, say)
    for key, value in sorted(outputs.items()):
        say(f"  {key}: {value.shown()}")


@handle_errors
def refresh(stack: str = typer.Argument(..., help=STACK_HELP)) -> None:
    """Read every resource back from its host or store; print what drifted (the next `inferry up` repairs it)."""
    s = load_stack(stack)
    deployer = make_deployer()
    deployer.check(s)
    say(f"refreshing {s.name}")
    changes = deployer.refresh(s, say)
    say(f"{s.name} refreshed: {changes.line()}")


@handle_errors
def destroy(stack: str = typer.Argument(..., help=STACK_HELP),
            yes: bool = typer.Option(False, "--yes", "-y", help="do not ask for confirmation")) -> None:
    """Delete every resource of the stack (the weight store's bucket stays unless force_destroy); print, and keep
    under .inferry/records/, what was removed from each machine."""
    s = load_stack(stack)
    deployer = make_deployer()
    deployer.check(s)  # before the question: a yes must not lead to "Pulumi is missing"
    if not yes:
        confirm(f"destroy every resource of stack {s.name}?")
    from infra.privacy.removal import destroy_recorded

    say(f"destroying {s.name}")
    changes = destroy_recorded(s, lambda: deployer.destroy(s, say), say)
    say(f"{s.name} destroyed: {changes.line()}")


@handle_errors
def outputs(stack: str = typer.Argument(..., help=STACK_HELP),
            as_json: bool = typer.Option(False, "--json", help="print JSON (secrets stay hidden)")) -> None:
    """Print the stack's outputs (endpoint, model, ...)."""
    s = load_stack(stack)
    values = make_deployer().outputs(s)
    if as_json:
        say(json.dumps({k: "[secret]" if v.secret else v.value for k, v in values.items()}, indent=2, sort_keys=True))
        return
    for key, value in sorted(values.items()):
        say(f"{key}: {value.shown()}")


@handle_errors
def migrate(
    source: str = typer.Option(..., "--from", help="the stack serving now (" + STACK_HELP + ")"),
    target: str = typer.Option(..., "--to", help="the stack to move to"),
    allow_changes: bool = typer.Option(False, "--allow-changes", help="allow model/engine to differ"),
    destroy_source: bool = typer.Option(False, "--destroy-source", help="destroy the source once the target serves "
                                        "and the source has drained"),
    drain_grace: float = typer.Option(10.0, "--drain-grace", min=0, help="with --destroy-source: seconds the source "
                                      "must have had no request running or waiting before it is destroyed"),
    drain_timeout: float = typer.Option(300.0, "--drain-timeout", min=0, help="with --destroy-source: give up "
                                        "waiting for the source to drain after this many seconds (it stays)"),
    yes: bool = typer.Option(False, "--yes", "-y", help="do not ask for confirmation"),
) -> None:
    """Move a serving deployment to another stack: copy weights, bring it up, check it, then cut over."""
    from infra.lifecycle.drain import Drain
    from infra.lifecycle.migrate import Migration

    a, b = load_stack(source), load_checked(target)
    deployer = make_deployer()
    for s in (a, b):  # bring-up and destroy need the Pulumi CLI: find out before any weights are copied
        deployer.check(s)
    m = Migration(a, b, deployer, make_weights(), say=say, drain=Drain(drain_grace, drain_timeout))
    plan = m.plan(allow_changes)
    say(f"migrate {a.name} -> {b.name}")
    for d in plan.diffs:
        say(d.line())
    say(plan.estimate.line() if plan.estimate else "weights: on the hosts (not in a store): nothing to copy")
    if plan.resume_from:
        say(f"resuming: already done: {', '.join(plan.resume_from)}")
    action = f"bring up {b.name}" + (f" and then destroy {a.name}" if destroy_source else "")
    if not yes:
        confirm(f"{action}?")
    m.run(destroy_source)


OPTIONAL_STACK = typer.Argument(None, help=STACK_HELP + " (may be left out with --endpoint)")
KEY_ENV = typer.Option("INFERRY_API_KEY", "--api-key-env", metavar="VAR",
                       help="with --endpoint and no STACK: the environment variable holding the API key")
JSON = typer.Option(False, "--json", help="print JSON for machines")


def _stack_or_none(stack: str | None, endpoint: object) -> Stack | None:
    """The named stack, or None when only --endpoint is given (InferryError when neither is)."""
    if stack is None and not endpoint:
        raise InferryError("no stack or endpoint given", "pass STACK (its endpoints come from the Pulumi outputs), "
                           "or --endpoint URL", where="arguments")
    return load_stack(stack) if stack else None


@handle_errors
def status(stack: str = OPTIONAL_STACK,
           endpoint: list[str] = typer.Option(None, "--endpoint", metavar="URL",
                                              help="probe this URL instead of the stack's Pulumi outputs "
                                              "(repeatable; needs no Pulumi CLI)"),
           api_key_env: str = KEY_ENV, as_json: bool = JSON) -> None:
    """Each endpoint's health and live engine metrics (KV cache, queue, time to first token); on SSH hosts,
    each engine's state and restarts since the last apply."""
    from infra.lifecycle.direct import api_key, checked_urls
    from infra.lifecycle.status import endpoint_status, host_status, stack_status, status_json

    s = _stack_or_none(stack, endpoint)
    found = checked_urls(endpoint) if endpoint else endpoints(make_deployer().outputs(s), s.name)
    key = api_key(s, api_key_env, required=False)
    if endpoint:
        results, replicas = [endpoint_status(url, api_key=key) for url in found], []
    else:
        results, replicas = stack_status(s, found, key)
    hosts = host_status(s) if s is not None else []
    if as_json:
        say(json.dumps(status_json(results, hosts, replicas), indent=2))
    else:
        for line in [line for r in [*results, *replicas] for line in r.lines()] + hosts:
            say(line)
    # At zero on purpose, the door answers 503 until a request wakes a replica: that is not a failure.
    if not all(r.healthy for r in results) and not any(r.at_zero for r in replicas):
        raise typer.Exit(1)


@handle_errors
def bench(
    stack: str = OPTIONAL_STACK,
    endpoint: str = typer.Option(None, "--endpoint", metavar="URL", help="load this URL instead of the stack's "
                                 "(needs no Pulumi CLI; without STACK the model is the first /v1/models lists)"),
    api_key_env: str = KEY_ENV,
    requests: int = typer.Option(64, help="how many chat completions"),
    concurrency: int = typer.Option(8, help="at most this many at a time"),
    prompt_tokens: int = typer.Option(256, help="prompt length (tokens, about)"),
    output_tokens: int = typer.Option(128, help="output length (tokens)"),
    report: Path = typer.Option(None, "--report", help="write the report here (default .inferry/bench/NAME.json)"),
    as_json: bool = typer.Option(False, "--json", help="print the report as JSON for machines"),
) -> None:
    """Load the endpoint; print tokens/s, TTFT and inter-token latency; record tokens/s for `inferry plan`."""
    from infra.lifecycle.bench import run_bench, target_of

    s = _stack_or_none(stack, endpoint)
    spec_args = dict(requests=requests, concurrency=concurrency, prompt_tokens=prompt_tokens,
                     output_tokens=output_tokens)
    target = target_of(s, None if endpoint else make_deployer(), endpoint, api_key_env)
    doc, lines = run_bench(target, spec_args, report)
    if as_json:
        say(json.dumps(doc, indent=2))
        return
    for line in lines:
        say(line)


def register(app: typer.Typer) -> None:
    """Add these commands to the app."""
    for fn in (preview, up, refresh, destroy, outputs, migrate, status, bench):
        app.command()(fn)


__all__ = ["register", "InferryError"]
