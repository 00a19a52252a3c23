"""jinja2 over templates/ (StrictUndefined), every value through a quoting filter; the file a target places."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import jinja2

from infra.render import quoting
from infra.stack.resources import bundled

TEMPLATES = bundled("templates")


@dataclass(frozen=True)
class RenderedFile:
    """One file to place in the target's service folder."""

    name: str
    content: str
    mode: int = 0o644


@functools.lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                             autoescape=False, keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(yaml=_yaml, compose=_compose, shell=quoting.shell, shell_join=quoting.shell_join)
    return env


def _compose(value: Any) -> str:
    """A YAML value for the compose file: Compose interpolates `$VAR`/`${VAR}` in every string and reads `$$`
    as `$`, so every `$` is doubled and the container gets the text the stack wrote."""
    return _yaml(_dollars(value))


def _dollars(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("$", "$$")
    if isinstance(value, dict):
        return {k: _dollars(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_dollars(v) for v in value]
    return value


def _yaml(value: Any) -> str:
    if isinstance(value, tuple):
        value = list(value)
    return quoting.yaml_value(value)


def render_template(name: str, **context: Any) -> str:
    """One template with its context; a missing variable is an error (StrictUndefined)."""
    return _env().get_template(name).render(**context)
