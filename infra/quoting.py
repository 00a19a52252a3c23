"""Quoting for each format a value can land in: POSIX shell, YAML, env files, nginx."""
from __future__ import annotations

import re
import shlex
from typing import Any, Iterable

import yaml

from infra.errors import InferryError

# Characters that need no quoting in an env file read by docker compose and POSIX sh alike.
_ENV_SAFE = re.compile(r"^[A-Za-z0-9_./:@%+=,-]*$")


def shell(value: Any) -> str:
    """One shell word (POSIX sh)."""
    return shlex.quote(str(value))


def shell_join(values: Iterable[Any]) -> str:
    """A shell command line, every word quoted."""
    return " ".join(shell(v) for v in values)


def yaml_value(value: Any) -> str:
    """A YAML flow value on one line (yaml.safe_dump), safe to place after 'key: ' or in a flow list."""
    text = yaml.safe_dump(value, default_flow_style=True, width=2**31 - 1, allow_unicode=False).strip()
    if text.endswith("\n..."):
        text = text[: -len("\n...")]
    if "\n" in text:  # never expected with an unbounded width; keep the one-line promise regardless
        raise ValueError(f"cannot render {value!r} on one YAML line")
    return text


def env_value(name: str, value: str) -> str:
    """An env-file value that docker compose (env_file:) and `. file` in sh read back unchanged."""
    if _ENV_SAFE.match(value):
        return value
    if "'" in value or "\n" in value or "\x00" in value or "\\" in value or "$" in value:
        # compose interpolates '$' outside single quotes and unescapes backslashes in double quotes; no
        # quoting covers a single quote in both readers.
        raise InferryError(f"the value of {name} contains characters an env file cannot carry safely",
                           "use a value without quotes, backslashes, '$' or newlines (regenerate the secret)")
    return "'" + value + "'"


def nginx_token(name: str, value: str) -> str:
    """A literal for an nginx config (an API key): only characters nginx takes without quoting or variables."""
    if not re.match(r"^[A-Za-z0-9._~+/=-]+$", value):
        raise InferryError(f"{name} contains characters the authenticating proxy cannot match literally",
                           "use an API key of letters, digits and . _ ~ + / = -")
    return value
