"""`inferry validate` and `inferry init`: check and create stack files."""
from __future__ import annotations

from pathlib import Path

import typer

from cli.common import check_adapters, err, handle_errors, load_checked, out
from infra.errors import InferryError
from infra.stack.kinds import engine_kinds, target_kinds
from infra.stack.project import in_project, project_root
from infra.stack.stackfile import stack_path

STACK_HELP = "a stack name under stacks/ (e.g. eu-ssh) or a path to a stack file"


@handle_errors
def validate(stack: str = typer.Argument(..., help=STACK_HELP),
             from_store: bool = typer.Option(False, "--from-store", help="also read each LoRA adapter's "
                                             "adapter_config.json from the weight store (rank, base model)")) -> None:
    """Check a stack file: prints OK, or one bullet per problem and exits 1."""
    s = load_checked(stack)
    if from_store:
        check_adapters(s)
    from infra.targets.registry import target_for

    d = s.deployment
    where = target_for(d.target.kind).summary(d)
    out.print(f"OK {s.source}: {d.model.name} with {d.engine.kind} on {where} at {d.provider.name} "
              f"({d.provider.region}, {d.provider.gpu_count}x {d.provider.gpu_name})", markup=False)


@handle_errors
def init(
    stack: str = typer.Argument(..., help=STACK_HELP),
    target: str | None = typer.Option(None, help="a target kind (default: the first registered; a wrong one lists them)"),
    engine: str | None = typer.Option(None, help="an engine kind (default: the first registered; a wrong one lists them)"),
) -> None:
    """Write a commented stack file that validates (never overwrites); a stack NAME in a folder that is not a
    Pulumi project also makes the folder one (Pulumi.yaml, __main__.py), so `pulumi up` runs there too."""
    from infra.stack.initfile import render_init  # jinja2: only `init` renders a template

    _, path = stack_path(stack, examples=False)
    named = path.parent.resolve() == (project_root() / "stacks").resolve()  # a name, not a path
    made = _make_project(project_root()) if named and not in_project() else []
    if path.exists() and not made:
        raise InferryError(f"{path} already exists", "choose another stack name or delete the file first")
    if path.exists():
        out.print(f"kept {path.resolve()} (it exists)", markup=False)
    else:
        _write_new(path, render_init(target or target_kinds()[0], engine or engine_kinds()[0]), stack)
        out.print(f"wrote {path.resolve()}", markup=False)
    for f in made:
        out.print(f"wrote {f.resolve()}", markup=False)
    if made:
        err.print(f"{project_root()} is now a Pulumi project: `inferry up {stack}` and `pulumi up --stack {stack}` "
                  "typed here run the same program (__main__.py), stack files (stacks/) and state", markup=False)
    elif named:
        err.print(f"stack names resolve in {project_root()} (its Pulumi project): run inferry there", markup=False)
    out.print(f"next: edit it, then run: inferry validate {stack}", markup=False)


def _make_project(root: Path) -> list[Path]:
    from infra.lifecycle.projectfiles import make_project

    return make_project(root)


def _write_new(path: Path, text: str, stack: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "x", encoding="utf-8") as fh:  # "x": never clobber a file that appeared meanwhile
            fh.write(text)
    except OSError as e:
        raise InferryError(f"cannot write {e.filename or path}: {e.strerror}", "pass a path in a writable folder "
                           "(no file in the way of its folders)", where=stack) from None


def register(app: typer.Typer) -> None:
    """Add these commands to the app."""
    app.command()(validate)
    app.command()(init)


__all__ = ["register", "Path"]
