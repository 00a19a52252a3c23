"""The commented starter stack file written by `inferry init`."""
from __future__ import annotations


import jinja2

from infra.errors import InferryError
from infra.stack.kinds import ENGINES, TARGETS
from infra.stack.resources import bundled

TEMPLATES = bundled("templates")


def render_init(target: str, engine: str) -> str:
    """The starter stack text for a target and engine kind."""
    for flag, kinds, kind in (("--target", TARGETS, target), ("--engine", ENGINES, engine)):
        if kind not in kinds.kinds():
            raise InferryError(f"unknown {kinds.key} {kind!r}", f"use {flag} {' or '.join(kinds.kinds())}", where=flag)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True)
    return env.get_template("stack.yaml.j2").render(
        target_section=TARGETS.starter(target).rstrip("\n"), engine_section=ENGINES.starter(engine).rstrip("\n"))
