"""The `inferry` app: every command group registered in one place."""
from __future__ import annotations

import typer

from cli import plan, stackcmds, weights

app = typer.Typer(
    name="inferry",
    help="LLM inference on anyone's GPUs: one stack file per environment.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
stackcmds.register(app)
plan.register(app)
weights.register(app)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
