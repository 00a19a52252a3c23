"""Values unknown when a deployment is checked (another resource's Outputs): placeholders, then the values.

A deployment is checked on plain values before anything is created. An address, a bucket or a kubeconfig that
another resource makes is an Output: it stands in the checked deployment as a placeholder the schema accepts
(unique text, so a child's inputs can say where it went), and a Fill puts the value in each child's inputs
once it resolves, after the caller's check of the deployment with the real values (before any remote step,
which waits for its inputs). In a preview the values may stay unknown: the check and the Fill do not run then,
and the children's inputs are unknown. pulumi is imported only where an Output is made.
"""
from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Provider inputs -> the same inputs with every late value put in; the stack-file program has none.
Fill = Callable[[dict[str, Any]], dict[str, Any]]

TOKEN = "inferry-late-{:04d}"  # fixed width: no placeholder is a part of another


def unchanged(props: dict[str, Any]) -> dict[str, Any]:
    """The Fill of a deployment whose every value was known when it was checked."""
    return props


def _form(key: str, token: str) -> str:
    """A placeholder the schema accepts for the field named key (an address, a user and a bucket take the token)."""
    if key == "endpoint":
        return f"https://{token}.invalid"
    if key == "host_key":
        return "ssh-ed25519 " + base64.b64encode(token.encode()).decode()
    return token


def is_output(value: Any) -> bool:
    """Whether value is an Output (without importing pulumi when the caller never made one)."""
    import sys

    pulumi = sys.modules.get("pulumi")
    return pulumi is not None and isinstance(value, pulumi.Output)


@dataclass
class Late:
    """The late values of one deployment: placeholder -> Output, and placeholder -> field path."""

    values: dict[str, Any] = field(default_factory=dict)
    paths: dict[str, str] = field(default_factory=dict)
    _resolved: Any = None

    def split(self, raw: Any, path: str = "") -> Any:
        """raw (sections as mappings and lists) with every Output replaced by its placeholder."""
        if isinstance(raw, dict):
            return {k: self.split(v, f"{path}.{k}" if path else str(k)) for k, v in raw.items()}
        if isinstance(raw, (list, tuple)):
            return [self.split(v, f"{path}[{i}]") for i, v in enumerate(raw)]
        if not is_output(raw):
            return raw
        placeholder = _form(path.rsplit(".", 1)[-1], TOKEN.format(len(self.values)))
        self.values[placeholder], self.paths[placeholder] = raw, path
        return placeholder

    def at(self, path: str) -> bool:
        """Whether the field at path (e.g. target.hosts[0].address) is a late value."""
        return path in self.paths.values()

    def check_when_known(self, check: Callable[[dict[str, str]], None]) -> None:
        """Run check(placeholder -> value) once every late value is known, before any Fill gives a value."""
        import pulumi

        def checked(values: dict[str, Any]) -> dict[str, str]:
            known = {ph: str(v) for ph, v in values.items()}
            check(known)
            return known

        self._resolved = pulumi.Output.all(**self.values).apply(checked) if self.values else None

    def fill(self, props: dict[str, Any]) -> dict[str, Any]:
        """props with every placeholder replaced by its value (an Output where one was there; else unchanged)."""
        if self._resolved is None:
            return props
        return {k: self._resolved.apply(lambda m, v=v: replaced(v, m)) if self._mentions(v) else v
                for k, v in props.items()}

    def _mentions(self, v: Any) -> bool:
        if isinstance(v, str):
            return any(ph in v for ph in self.values)
        if isinstance(v, dict):
            return any(self._mentions(x) for x in v.values())
        return isinstance(v, (list, tuple)) and any(self._mentions(x) for x in v)


def replaced(v: Any, values: dict[str, str]) -> Any:
    """v with each placeholder in its text replaced by its value (dicts and lists walked)."""
    if isinstance(v, str):
        for ph, value in values.items():
            v = v.replace(ph, value)
        return v
    if isinstance(v, dict):
        return {k: replaced(x, values) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [replaced(x, values) for x in v]
    return v
