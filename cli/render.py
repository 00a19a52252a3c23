"""`inferry render`: every file the target would place for a stack, or its service spec as JSON."""
from __future__ import annotations

import json
from pathlib import Path

import typer

from cli.common import handle_errors, load_checked, out
from infra.errors import InferryError

STACK_HELP = "a stack name under stacks/ (e.g. eu-ssh) or a path to a stack file"


def rendered_files(stack) -> list:
    """The files for a stack, secrets as REDACTED placeholders (the CLI never resolves secret values)."""
    from infra.render.templates import RenderedFile
    from infra.targets.registry import target_for

    return [RenderedFile(p.name, p.content, p.mode) for p in target_for(stack.deployment.target.kind).placements(stack)]


@handle_errors
def render_cmd(
    stack: str = typer.Argument(..., help=STACK_HELP),
    out_dir: Path = typer.Option(None, "--out", help="write the files and INDEX.json (where each goes) into this "
                                 "folder; a re-render removes the files it no longer writes"),
    as_json: bool = typer.Option(False, "--json", help="print the service spec (secrets as references)"),
) -> None:
    """Render a stack: --out DIR writes the files a host gets; --json prints image, command, env, port."""
    from infra.render.service import service_json
    from infra.targets.registry import target_for

    if (out_dir is None) == (not as_json):
        raise InferryError("give exactly one of --out DIR or --json", "e.g. inferry render eu-ssh --out out/eu-ssh")
    s = load_checked(stack)
    target = target_for(s.deployment.target.kind)
    if as_json:
        out.print(json.dumps(service_json(target.service_spec(s.deployment)), indent=2, sort_keys=True), markup=False)
        return
    from infra.render.out import write_render

    placed = target.placements(s)
    if not placed:
        out.print(f"no files for a {target.kind} target yet; see `inferry render {stack} --json`", markup=False)
        return
    for line in write_render(out_dir, s.name, target.kind, placed):
        out.print(line, markup=False)


def register(app: typer.Typer) -> None:
    """Add `render` to the app."""
    app.command(name="render")(render_cmd)
