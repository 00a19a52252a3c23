"""`inferry render`: every file the target would place for a stack, or its service spec as JSON."""
from __future__ import annotations

import json
import os
from pathlib import Path

import typer

from cli.common import handle_errors, out
from infra.errors import InferryError
from infra.stackfile import load_stack

STACK_HELP = "a stack name under stacks/ (e.g. eu-ssh) or a path to a stack file"


def rendered_files(stack) -> list:
    """The files for a stack, secrets as REDACTED placeholders (the CLI never resolves secret values)."""
    from infra import render

    d = stack.deployment
    if d.target.kind != "ssh":
        return [render.RenderedFile(name, text) for name, text in sorted(render.render_kubernetes(stack).items())]
    spec = render.ssh_spec(stack)
    files = render.render_ssh_files(stack, spec) + render.render_secret_files(spec, render.redacted_values(spec))
    return sorted(files, key=lambda f: f.name)


def _write(out_dir: Path, files: list) -> None:
    """Write the files into out_dir, creating it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for f in files:
        path = out_dir / f.name
        path.write_text(f.content, encoding="utf-8")
        os.chmod(path, f.mode)


@handle_errors
def render_cmd(
    stack: str = typer.Argument(..., help=STACK_HELP),
    out_dir: Path = typer.Option(None, "--out", help="write the files into this folder"),
    as_json: bool = typer.Option(False, "--json", help="print the service spec (secrets as references)"),
) -> None:
    """Render a stack: --out DIR writes the files a host gets; --json prints image, command, env, port."""
    from infra import render
    from infra.engines import service_spec

    if (out_dir is None) == (not as_json):
        raise InferryError("give exactly one of --out DIR or --json", "e.g. inferry render eu-ssh --out out/eu-ssh")
    s = load_stack(stack)
    if as_json:
        spec = render.ssh_spec(s) if s.deployment.target.kind == "ssh" else service_spec(s.deployment)
        out.print(json.dumps(render.service_json(spec), indent=2, sort_keys=True), markup=False)
        return
    files = rendered_files(s)
    try:
        _write(out_dir, files)
    except OSError as e:
        raise InferryError(f"cannot write {e.filename or out_dir}: {e.strerror}",
                           "pass --out a folder that can be created and written (not a file)", where="--out") from None
    if not files:
        out.print(f"no files for a {s.deployment.target.kind} target yet; see `inferry render {stack} --json`",
                  markup=False)
    for f in files:
        out.print(f"wrote {out_dir / f.name} ({f.mode:o})", markup=False)


def register(app: typer.Typer) -> None:
    """Add `render` to the app."""
    app.command(name="render")(render_cmd)
