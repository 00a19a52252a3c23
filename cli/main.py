"""The `inferry` app: every command group registered in one place."""
from __future__ import annotations

import typer

from cli import lifecycle, plan, render, stackcmds, weights

app = typer.Typer(
    name="inferry",
    help="LLM inference on anyone's GPUs: one stack file per environment.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
for module in (stackcmds, plan, render, weights, lifecycle):
    module.register(app)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"inferry {version('inferry')}")
        except PackageNotFoundError:  # run from a checkout without installing it
            typer.echo("inferry (not installed: run scripts/setup.sh)")
        raise typer.Exit()


@app.callback()
def _options(_: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                    help="print the version and exit")) -> None:
    """LLM inference on anyone's GPUs: one stack file per environment."""


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
