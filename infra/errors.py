"""The one error family: every expected failure is an InferryError with a cause and a fix."""
from __future__ import annotations

import functools
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass
class Problem:
    """One problem with a field of the stack file: where, what was expected, what was found."""

    path: str
    message: str
    found: str | None = None
    hint: str | None = None
    severity: str = "error"  # or "warning": reported, does not fail validation

    def render(self) -> str:
        """One line, for a bullet list."""
        text = f"{self.path}: {self.message}" if self.path else self.message
        if self.found is not None:
            text += f" (found {self.found})"
        if self.hint:
            text += f"; {self.hint}"
        return text


class InferryError(Exception):
    """An expected failure: says what went wrong and how to fix it."""

    def __init__(self, message: str, fix: str | None = None, *, where: str | None = None):
        self.message = message
        self.fix = fix
        self.where = where
        super().__init__(self.render())

    def render(self) -> str:
        """The message as the CLI prints it."""
        head = f"{self.where}: {self.message}" if self.where else self.message
        return f"{head}\n  fix: {self.fix}" if self.fix else head


class ConfigError(InferryError):
    """The stack file is wrong; carries one Problem per field."""

    def __init__(self, source: str, problems: list[Problem]):
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  - {p.render()}" for p in problems)
        n = len(problems)
        super().__init__(f"{source}: {n} problem{'s' if n != 1 else ''}\n{lines}")

    @property
    def paths(self) -> list[str]:
        """The field paths named, in order."""
        return [p.path for p in self.problems]


class SecretError(InferryError):
    """A secret is missing, unreadable or written in plain text."""


class SizingError(InferryError):
    """The deployment does not fit on the chosen GPUs."""


class StorageError(InferryError):
    """The weight store refused, failed or holds something inconsistent."""


class RemoteError(InferryError):
    """A host (over SSH) failed a step."""


class Unreachable(RemoteError):
    """The host could not be reached, or its SSH connection was lost mid-command: nothing says the change is
    wrong, so a rolling update goes on without the host."""


class ConnectionLost(Unreachable):
    """An open SSH connection dropped under a command: a read that changes nothing may be asked again on a new
    connection (infra.targets.ssh.pool.read)."""


class Interrupted(InferryError):
    """A signal (Ctrl-C) stopped a command; the CLI exits 130, as a shell does for SIGINT."""

    exit_code = 130


class PulumiMissingError(InferryError):
    """The Pulumi CLI is needed but not installed."""


def in_provider_host() -> bool:
    """Whether this process is Pulumi's dynamic-provider host (`python -m pulumi.dynamic`)."""
    main = sys.modules.get("__main__")
    return getattr(getattr(main, "__spec__", None), "name", "") == "pulumi.dynamic.__main__"


def reported(fn: Callable[..., T]) -> Callable[..., T]:
    """For dynamic-provider methods: Pulumi shows an InferryError as its message, not a Python traceback.

    Pulumi's provider host answers a failed call with traceback.format_exc() (pulumi/dynamic/__main__.py),
    which honours sys.tracebacklimit: at 0 only the exception's line is left. An unexpected exception
    keeps its traceback inside the message, where it is a bug report.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        if in_provider_host():
            sys.tracebacklimit = 0
        try:
            return fn(*args, **kwargs)
        except InferryError as e:
            raise e from None  # the message says it all; the chain of causes is noise to the user
        except Exception as e:  # noqa: BLE001 - re-raised with its traceback in the message
            trace = "".join(traceback.format_exception(e, limit=40))
            raise InferryError(f"unexpected error (a bug in inferry, please report it):\n{trace}") from None

    return wrapper
