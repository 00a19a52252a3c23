"""The commented starter stack file written by `inferry init`."""
from __future__ import annotations


import jinja2

from infra.errors import InferryError
from infra.stack.kinds import engine_kinds, starter
from infra.stack.resources import bundled

TEMPLATES = bundled("templates")
TARGETS = ("ssh", "kubernetes")


def render_init(target: str, engine: str) -> str:
    """The starter stack text for a target and engine kind."""
    if target not in TARGETS:
        raise InferryError(f"unknown target {target!r}", f"use --target {' or '.join(TARGETS)}", where="--target")
    if engine not in engine_kinds():
        raise InferryError(f"unknown engine {engine!r}", f"use --engine {' or '.join(engine_kinds())}",
                           where="--engine")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True)
    return env.get_template("stack.yaml.j2").render(
        target=target, engine_section=starter(engine).rstrip("\n"))
