"""`inferry validate` and `inferry init`: check and create stack files."""
from __future__ import annotations

from pathlib import Path

import typer

from cli.common import err, handle_errors, out, say_example
from infra.errors import ConfigError, InferryError
from infra.stack.project import in_project, project_root
from infra.stack.stackfile import load_stack, stack_path
from infra.stack.validate import findings

STACK_HELP = "a stack name under stacks/ (e.g. eu-ssh) or a path to a stack file"


@handle_errors
def validate(stack: str = typer.Argument(..., help=STACK_HELP)) -> None:
    """Check a stack file: prints OK, or one bullet per problem and exits 1."""
    s = load_stack(stack)
    say_example(s)
    found = findings(s.deployment)
    errors = [p for p in found if p.severity == "error"]
    if errors:  # warnings wait for a stack without errors, as at load: the errors come first, alone
        raise ConfigError(s.source, errors)
    for w in [*s.warnings, *(p for p in found if p.severity == "warning")]:
        err.print(f"  warning: {w.render()}", markup=False)
    d = s.deployment
    where = f"{len(d.target.hosts)} ssh host(s)" if d.target.kind == "ssh" else f"kubernetes ns {d.target.namespace}"
    out.print(f"OK {s.source}: {d.model.name} with {d.engine.kind} on {where} at {d.provider.name} "
              f"({d.provider.region}, {d.provider.gpu_count}x {d.provider.gpu})", markup=False)


@handle_errors
def init(
    stack: str = typer.Argument(..., help=STACK_HELP),
    target: str = typer.Option("ssh", help="ssh | kubernetes"),
    engine: str = typer.Option("vllm", help="vllm | tensorrt-llm"),
) -> None:
    """Write a commented stack file that validates; never overwrites."""
    from infra.stack.initfile import render_init  # jinja2: only `init` renders a template

    _, path = stack_path(stack, examples=False)
    if path.exists():
        raise InferryError(f"{path} already exists", "choose another stack name or delete the file first")
    text = render_init(target, engine)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "x", encoding="utf-8") as fh:  # "x": never clobber a file that appeared meanwhile
            fh.write(text)
    except OSError as e:
        raise InferryError(f"cannot write {e.filename or path}: {e.strerror}", "pass a path in a writable folder "
                           "(no file in the way of its folders)", where=stack) from None
    out.print(f"wrote {path.resolve()}; edit it, then run: inferry validate {stack}", markup=False)
    root = project_root()
    if path.parent.resolve() == (root / "stacks").resolve():  # named, not a path: say where names resolve
        why = "its Pulumi project" if in_project() else "no Pulumi.yaml here or above, so the current folder"
        err.print(f"stack names resolve in {root} ({why}): run inferry there", markup=False)


def register(app: typer.Typer) -> None:
    """Add these commands to the app."""
    app.command()(validate)
    app.command()(init)


__all__ = ["register", "Path"]
