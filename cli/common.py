"""Shared CLI plumbing: error printing without tracebacks, consoles."""
from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer

from infra.errors import ConfigError, InferryError
from infra.stack.secretfix import SecretField
from infra.stack.resources import bundled
from infra.stack.project import project_root

if TYPE_CHECKING:  # the weights commands must not load the stack schema (pydantic) to start
    from infra.stack.stackfile import Stack


class _LazyConsole:
    """A rich Console made on first use: importing rich costs a short command a good part of its start-up."""

    def __init__(self, **kw: Any):
        self._kw: dict[str, Any] = kw
        self._console: Any = None

    def print(self, *objects: Any, markup: bool | None = None, end: str = "\n", **kw: Any) -> None:
        """Plain strings without markup are written as they are (as rich would: no highlighting, no wrapping)."""
        if markup is False and not kw and all(isinstance(o, str) for o in objects):
            stream = sys.stderr if self._kw.get("stderr") else sys.stdout
            stream.write(" ".join(objects) + end)
            stream.flush()
            return
        self.__getattr__("print")(*objects, markup=markup, end=end, **kw)

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._kw)
        return getattr(self._console, name)


out: Any = _LazyConsole(highlight=False, soft_wrap=True)
err: Any = _LazyConsole(stderr=True, highlight=False, soft_wrap=True)


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


def load_checked(stack: str, uses: frozenset[str] | None = None, own: frozenset[str] = frozenset()) -> Stack:
    """The stack, past the one gate (`inferry validate`'s checks): its warnings on stderr; a stack validate
    refuses raises ConfigError with the same bullets, so nothing is rendered, planned or deployed from it."""
    from infra.stack.stackfile import load_stack
    from infra.stack.validate import require_valid

    s = load_stack(stack, uses=uses)
    say_example(s)
    found = require_valid(s.deployment, s.source, own)  # errors come first, alone: warnings wait for none
    for w in [*s.warnings, *found]:
        err.print(f"  warning: {w.render()}", markup=False)
    return s


STORE_SECRETS = frozenset({SecretField.S3_ACCESS, SecretField.S3_SECRET})  # what reading the store needs


def check_adapters(s: Stack) -> None:
    """Each of the stack's LoRA adapters against its adapter_config.json in the store (rank, base model, a LoRA
    at all): ConfigError with one bullet per problem, before anything is planned or deployed."""
    if not s.deployment.model.adapters:
        return
    from infra.lifecycle.secrets import resolver
    from infra.sizing.adapters import adapter_store_problems
    from infra.storage.remote import adapter_readers

    problems = adapter_store_problems(s.deployment, adapter_readers(s, resolver(s)))
    if problems:
        raise ConfigError(s.source, problems)


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run a command; an InferryError prints cleanly and exits 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InferryError as e:
            print_error(e)
            raise typer.Exit(getattr(e, "exit_code", 1)) from None
        except KeyboardInterrupt:
            err.print("interrupted")
            raise typer.Exit(130) from None

    return wrapper


def confirm(question: str) -> None:
    """Ask before a destructive step; no terminal means no answer, so say to pass --yes."""
    if not sys.stdin.isatty():
        raise InferryError(f"'{question}' needs a yes, but there is no terminal to ask on", "pass --yes")
    if not typer.confirm(question):
        err.print("cancelled: nothing was changed")
        raise typer.Exit(1)
