"""The commented starter stack file written by `inferry init`."""
from __future__ import annotations


import jinja2

from infra.stack.config_engines import TRTLLM_VERSION, VLLM_VERSION
from infra.errors import InferryError
from infra.stack.kinds import ENGINE_KINDS
from infra.stack.resources import bundled

TEMPLATES = bundled("templates")
TARGETS = ("ssh", "kubernetes")
ENGINES = ENGINE_KINDS


def render_init(target: str, engine: str) -> str:
    """The starter stack text for a target and engine kind."""
    if target not in TARGETS:
        raise InferryError(f"unknown target {target!r}", f"use --target {' or '.join(TARGETS)}", where="--target")
    if engine not in ENGINES:
        raise InferryError(f"unknown engine {engine!r}", f"use --engine {' or '.join(ENGINES)}", where="--engine")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True)
    return env.get_template("stack.yaml.j2").render(
        target=target, engine=engine, vllm_version=VLLM_VERSION, trtllm_version=TRTLLM_VERSION)
