"""The engine sections the stack schema accepts, registered by the engines' room and read lazily.

stack/ sits below engines/ and cannot ask the engine registry (infra/engines/registry.py). Instead
infra.checks.register_checks() hands this module a loader (no import happens then); the first time the
schema, an error message or `inferry init` needs the engine kinds, the loader returns the registered
descriptors (each has `kind`, `config`: its `engine:` section class, and `starter`: its `inferry init` lines).
"""
from __future__ import annotations

import typing
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import Field

_loader: Callable[[], Iterable[Any]] | None = None
_sections: dict[str, Any] | None = None


def register_engines(loader: Callable[[], Iterable[Any]]) -> None:
    """Set where the engine sections come from (called again, it replaces the loader and forgets the kinds)."""
    global _loader, _sections
    _loader, _sections = loader, None


def _registered() -> dict[str, Any]:
    global _sections
    if _sections is None:
        if _loader is None:  # loud: a schema without the engines would refuse every engine section
            raise RuntimeError("no engine sections registered: call infra.checks.register_checks() first "
                               "(the CLI and the Pulumi program do)")
        _sections = {e.kind: e for e in _loader()}
    return _sections


def engine_kinds() -> tuple[str, ...]:
    """Every registered engine kind, in registry order."""
    return tuple(_registered())


def engine_sections() -> tuple[type, ...]:
    """Every registered `engine:` section class, in registry order."""
    return tuple(e.config for e in _registered().values())


def starter(kind: str) -> str:
    """The engine section `inferry init` writes for a kind (YAML lines under `engine:`)."""
    return _registered()[kind].starter


class EngineSection:
    """Annotated marker for Deployment.engine: the discriminated union of the registered sections, built when
    the schema is first needed (Deployment defers its build)."""

    def union(self) -> Any:
        """Annotated[Union[sections...], discriminator kind]: what the field's type is once registered."""
        return typing.Annotated[typing.Union[engine_sections()], Field(discriminator="kind")]

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        return handler.generate_schema(self.union())
