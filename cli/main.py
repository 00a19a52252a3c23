"""The `inferry` app: every command group registered in one place; a run imports only its command's module."""
from __future__ import annotations

import functools
import importlib
import sys

import typer

MODULES = ("stackcmds", "plan", "render", "weights", "lifecycle", "record", "gateway")
# Which module registers each top-level command: `inferry validate` need not import Pulumi's
# automation API, nor `inferry weights pull` the stack models (start-up is most of a short command).
COMMANDS = {"validate": "stackcmds", "init": "stackcmds", "plan": "plan", "render": "render", "weights": "weights",
            "record": "record", "gateway": "gateway",
            **dict.fromkeys(("preview", "up", "refresh", "destroy", "outputs", "migrate", "status", "bench"),
                            "lifecycle")}
HELP = "LLM inference on anyone's GPUs: one stack file per environment."


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"inferry {version('inferry')}")
        except PackageNotFoundError:  # run from a checkout without installing it
            typer.echo("inferry (not installed: run scripts/setup.sh)")
        raise typer.Exit()


def _options(_: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                    help="print the version and exit")) -> None:
    """LLM inference on anyone's GPUs: one stack file per environment."""
    from infra.checks import register_checks

    register_checks()  # every command that loads a stack runs validate's checks


def build(modules: tuple[str, ...] = MODULES) -> typer.Typer:
    """The app with the commands of these cli modules (all of them by default)."""
    app = typer.Typer(name="inferry", help=HELP, no_args_is_help=True, add_completion=False,
                      pretty_exceptions_enable=False)
    app.callback()(_options)
    for name in modules:
        importlib.import_module(f"cli.{name}").register(app)
    return app


@functools.lru_cache(maxsize=1)
def _full() -> typer.Typer:
    return build()


def __getattr__(name: str) -> typer.Typer:
    """`from cli.main import app`: the app with every command (built on first use)."""
    if name == "app":
        return _full()
    raise AttributeError(name)


def main() -> None:
    """Console-script entry point: registers only the module of the command asked for (all for help or a typo)."""
    command = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
    build((COMMANDS[command],) if command in COMMANDS else MODULES)()


if __name__ == "__main__":
    main()
