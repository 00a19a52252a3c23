"""`inferry gateway`: what the gateway needs on a host, built from the sources inferry ships."""
from __future__ import annotations

from pathlib import Path

import typer

from cli.common import handle_errors, out


@handle_errors
def build_caddy_cmd(
    output: Path = typer.Option(Path("caddy"), "--output", "-o", help="where to write the binary"),
    arch: str = typer.Option("amd64", "--arch", help="the gateway host's CPU: amd64 or arm64"),
) -> None:
    """Build inferry's Caddy (Caddy plus the gateway's limits module) with the local Go, for a gateway host."""
    from infra.gateway.build import build_caddy

    version = build_caddy(output, arch)
    out.print(f"built {output} (Caddy {version}, linux/{arch}). Install it on each gateway host as /usr/bin/caddy, "
              f"e.g.: scp {output} HOST:/tmp/caddy && ssh HOST sudo install -m 755 /tmp/caddy /usr/bin/caddy",
              markup=False)


def register(app: typer.Typer) -> None:
    """Add `gateway` and its commands to the app."""
    group = typer.Typer(help="The gateway's own build.", no_args_is_help=True)
    group.command(name="build-caddy")(build_caddy_cmd)
    app.add_typer(group, name="gateway")
