"""The `inferry` app: every command group registered in one place."""
from __future__ import annotations

import typer

from cli import plan, render, stackcmds, weights

app = typer.Typer(
    name="inferry",
    help="LLM inference on anyone's GPUs: one stack file per environment.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
for module in (stackcmds, plan, render, weights):
    module.register(app)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
