"""`inferry record`: the record of processing, read back from the running deployment."""
from __future__ import annotations

import json

import typer

from cli.common import err, handle_errors, load_checked, out

STACK_HELP = "a stack name under stacks/ (e.g. eu-ssh) or a path to a stack file"


@handle_errors
def record(stack: str = typer.Argument(..., help=STACK_HELP),
           as_json: bool = typer.Option(False, "--json", help="print the record as JSON for machines"),
           check: bool = typer.Option(False, "--check", help="exit 1 naming each difference between what runs "
                                      "and the stack's policy (telemetry, prompt logging, residency, "
                                      "sub-processors)")) -> None:
    """Where the deployment runs, what it keeps, what leaves it and who can call it, read from its machines."""
    from infra.privacy.markdown import record_markdown
    from infra.privacy.record import differences, read_record

    s = load_checked(stack)
    r = read_record(s)
    out.print(json.dumps(r.as_json(), indent=2) if as_json else record_markdown(r), markup=False)
    if not check:
        return
    found = differences(s.deployment, r)
    if found:
        err.print(f"error: {s.name}: what runs differs from the stack's policy:", markup=False)
        for p in found:
            err.print(f"  • {p.render()}", markup=False)
        raise typer.Exit(1)
    err.print(f"{s.name}: what runs matches the stack's policy ({len(r.replicas)} replica(s) read)", markup=False)


def register(app: typer.Typer) -> None:
    """Add this command to the app."""
    app.command()(record)
