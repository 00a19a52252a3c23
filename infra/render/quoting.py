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


class _OneLineDumper(yaml.SafeDumper):
    """Strings with line breaks as double-quoted scalars ("a\\nb"): YAML folds them across lines otherwise."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = '"' if any(c in value for c in "\n\r\x85\u2028\u2029") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_OneLineDumper.add_representer(str, _str)


def yaml_value(value: Any) -> str:
    """A YAML flow value on one line, safe to place after 'key: ' or in a flow list."""
    text = yaml.dump(value, Dumper=_OneLineDumper, default_flow_style=True, width=2**31 - 1,
                     allow_unicode=False).strip()
    if text.endswith("\n..."):
        text = text[: -len("\n...")]
    if "\n" in text:  # never expected with an unbounded width; keep the one-line promise regardless
        raise ValueError(f"cannot render {value!r} on one YAML line")
    return text


def env_value(name: str, value: str) -> str:
    """An env-file value that docker compose (env_file:) and `. file` in sh read back unchanged."""
    if _ENV_SAFE.fullmatch(value):
        return value
    if "'" in value or "\n" in value or "\x00" in value or "\\" in value or "$" in value:
        # compose interpolates '$' outside single quotes and unescapes backslashes in double quotes; no
        # quoting covers a single quote in both readers.
        raise InferryError(f"the value of {name} contains characters an env file cannot carry safely",
                           "use a value without quotes, backslashes, '$' or newlines (regenerate the secret)")
    return "'" + value + "'"


def nginx_token(name: str, value: str) -> str:
    """A literal for an nginx config (an API key): only characters nginx takes without quoting or variables."""
    if not re.fullmatch(r"[A-Za-z0-9._~+/=-]+", value):
        raise InferryError(f"{name} contains characters the authenticating proxy cannot match literally",
                           "use an API key of letters, digits and . _ ~ + / = -")
    return value
