"""What a container sees of a Kubernetes command, args or env value: the kubelet's `$(VAR)` expansion.

A port of k8s.io/kubernetes third_party/forked/golang/expansion (Expand, tryReadVariableName, and
MappingFuncFor, which leaves an undefined `$(NAME)` as it is), so tests check the value the process gets.
"""
from __future__ import annotations


def _read_name(text: str) -> tuple[str, bool, int]:
    """(what was read, whether it is a variable name, how many bytes it used) after a '$'."""
    if text[0] == "$":
        return "$", False, 1  # an escaped operator
    if text[0] == "(":
        close = text.find(")", 1)
        if close > 0:
            return text[1:close], True, close + 1
        return "$(", False, 1  # an incomplete reference stays
    return "$" + text[0], False, 1


def expand(value: str, env: dict[str, str]) -> str:
    """The kubelet's expansion of value with the container's environment."""
    out, checkpoint, cursor = [], 0, 0
    while cursor < len(value):
        if value[cursor] == "$" and cursor + 1 < len(value):
            out.append(value[checkpoint:cursor])
            read, is_var, advance = _read_name(value[cursor + 1:])
            out.append(env.get(read, f"$({read})") if is_var else read)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    return "".join(out) + value[checkpoint:]
