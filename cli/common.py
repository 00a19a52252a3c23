"""Shared CLI plumbing: error printing without tracebacks, consoles."""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console

from infra.errors import ConfigError, InferryError
from infra.resources import bundled
from infra.stackfile import Stack, project_root

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def print_error(e: InferryError) -> None:
    """An InferryError as the user sees it: one bullet per problem, then the fix."""
    if isinstance(e, ConfigError):
        err.print(f"[red]error:[/red] {e.source}", markup=True)
        for p in e.problems:
            err.print(f"  • {p.render()}", markup=False)
        return
    err.print("[red]error:[/red] ", markup=True, end="")
    err.print(e.render(), markup=False)


def say_example(s: Stack) -> None:
    """A note on stderr when a stack name read the example the package ships (no such stack in the project)."""
    folder = project_root() / "stacks"
    if s.path is not None and s.path.parent == bundled("stacks") != folder:
        err.print(f"note: no Pulumi.{s.name}.yaml in {folder}: using the bundled example {s.path}", markup=False)


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run a command; an InferryError prints cleanly and exits 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InferryError as e:
            print_error(e)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            err.print("interrupted")
            raise typer.Exit(130) from None

    return wrapper


def confirm(question: str) -> None:
    """Ask before a destructive step; no terminal means no answer, so say to pass --yes."""
    import sys

    if not sys.stdin.isatty():
        raise InferryError(f"'{question}' needs a yes, but there is no terminal to ask on", "pass --yes")
    if not typer.confirm(question):
        err.print("cancelled: nothing was changed")
        raise typer.Exit(1)
