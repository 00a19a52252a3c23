"""Quoting for each format a value can land in: POSIX shell, systemd unit lines, YAML, env files, nginx."""
from __future__ import annotations

import re
import shlex
from typing import Any, Iterable

import yaml

from infra.errors import InferryError

# Characters that need no quoting in an env file read by docker compose, systemd and POSIX sh alike.
_ENV_SAFE = re.compile(r"^[A-Za-z0-9_./:@%+=,-]*$")


def shell(value: Any) -> str:
    """One shell word (POSIX sh)."""
    return shlex.quote(str(value))


def shell_join(values: Iterable[Any]) -> str:
    """A shell command line, every word quoted."""
    return " ".join(shell(v) for v in values)


def _systemd_word(value: str, executable: bool = False) -> str:
    # systemd.service "Command lines": double quotes group a word, C escapes inside them; '$' starts an
    # environment expansion in arguments ('$$' is a literal $) and '%' a specifier ('%%' is a literal %).
    # The executable is not expanded, and systemd refuses one with quotes, '\\' or '$' ("special characters").
    text = value.replace("%", "%%") if executable else value.replace("%", "%%").replace("$", "$$")
    out = []
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def systemd_command(values: Iterable[Any]) -> str:
    """An ExecStart= command line: each word double-quoted and escaped for systemd."""
    words = [str(v) for v in values]
    if not words or not words[0].startswith("/") or re.search(r"[$'\"\\\x00-\x1f\x7f]", words[0]):
        raise InferryError(f"{words[0] if words else 'nothing'!r} cannot be the program of a systemd unit",
                           "use an absolute path without quotes, '\\', '$' or control characters (target.service_dir)")
    return " ".join([_systemd_word(words[0], executable=True)] + [_systemd_word(w) for w in words[1:]])


def systemd_text(value: Any) -> str:
    """Free text for a unit (Description=): one line, specifiers escaped."""
    return re.sub(r"[\x00-\x1f\x7f]", " ", str(value)).replace("%", "%%")


def yaml_value(value: Any) -> str:
    """A YAML flow value on one line (yaml.safe_dump), safe to place after 'key: ' or in a flow list."""
    text = yaml.safe_dump(value, default_flow_style=True, width=2**31 - 1, allow_unicode=False).strip()
    if text.endswith("\n..."):
        text = text[: -len("\n...")]
    if "\n" in text:  # never expected with an unbounded width; keep the one-line promise regardless
        raise ValueError(f"cannot render {value!r} on one YAML line")
    return text


def env_value(name: str, value: str) -> str:
    """An env-file value that docker compose, systemd EnvironmentFile= and `. file` in sh read back unchanged."""
    if _ENV_SAFE.match(value):
        return value
    if "'" in value or "\n" in value or "\x00" in value or "\\" in value or "$" in value:
        # compose interpolates '$' outside single quotes; systemd unescapes backslashes; no quoting covers
        # a single quote in all three readers.
        raise InferryError(f"the value of {name} contains characters an env file cannot carry safely",
                           "use a value without quotes, backslashes, '$' or newlines (regenerate the secret)")
    return "'" + value + "'"


def nginx_token(name: str, value: str) -> str:
    """A literal for an nginx config (an API key): only characters nginx takes without quoting or variables."""
    if not re.match(r"^[A-Za-z0-9._~+/=-]+$", value):
        raise InferryError(f"{name} contains characters the authenticating proxy cannot match literally",
                           "use an API key of letters, digits and . _ ~ + / = -")
    return value
