"""The engine and target sections the stack schema accepts, registered by their rooms and read lazily.

stack/ sits below engines/ and targets/ and cannot ask their registries. Instead
infra.checks.register_checks() hands this module a loader for each (no import happens then); the first time
the schema, an error message or `inferry init` needs the kinds, the loader returns the registered
descriptors (each has `kind`, `config`: its section class, and `starter`: its `inferry init` lines).
"""
from __future__ import annotations

import typing
from collections.abc import Callable, Iterable
from typing import Any


class Kinds:
    """The sections one stack key (`engine:`, `target:`) may hold, by kind, as its room registered them."""

    def __init__(self, key: str):
        self.key = key
        self._loader: Callable[[], Iterable[Any]] | None = None
        self._sections: dict[str, Any] | None = None

    def register(self, loader: Callable[[], Iterable[Any]]) -> None:
        """Set where the sections come from (called again, it replaces the loader and forgets the kinds)."""
        self._loader, self._sections = loader, None

    def registered(self) -> dict[str, Any]:
        """The descriptors by kind, loaded on first use."""
        if self._sections is None:
            if self._loader is None:  # loud: a schema without them would refuse every section
                raise RuntimeError(f"no {self.key} sections registered: call infra.checks.register_checks() first "
                                   "(the CLI and the Pulumi program do)")
            self._sections = {e.kind: e for e in self._loader()}
        return self._sections

    def kinds(self) -> tuple[str, ...]:
        """Every registered kind, in registry order."""
        return tuple(self.registered())

    def sections(self) -> tuple[type, ...]:
        """Every registered section class, in registry order."""
        return tuple(e.config for e in self.registered().values())

    def starter(self, kind: str) -> str:
        """The section `inferry init` writes for a kind (YAML lines under the key)."""
        return self.registered()[kind].starter


ENGINES, TARGETS = Kinds("engine"), Kinds("target")


def register_engines(loader: Callable[[], Iterable[Any]]) -> None:
    """Set where the engine sections come from."""
    ENGINES.register(loader)


def register_targets(loader: Callable[[], Iterable[Any]]) -> None:
    """Set where the target sections come from."""
    TARGETS.register(loader)


def engine_kinds() -> tuple[str, ...]:
    """Every registered engine kind, in registry order."""
    return ENGINES.kinds()


def engine_sections() -> tuple[type, ...]:
    """Every registered `engine:` section class, in registry order."""
    return ENGINES.sections()


def starter(kind: str) -> str:
    """The engine section `inferry init` writes for a kind (YAML lines under `engine:`)."""
    return ENGINES.starter(kind)


def target_kinds() -> tuple[str, ...]:
    """Every registered target kind, in registry order."""
    return TARGETS.kinds()


class Section:
    """Annotated marker for a field whose type is the discriminated union of a Kinds' registered sections,
    built when the schema is first needed (Deployment defers its build)."""

    kinds: Kinds = ENGINES

    def union(self) -> Any:
        """Annotated[Union[sections...], discriminator kind]: what the field's type is once registered."""
        from pydantic import Field  # here: registering the kinds (every CLI command does) imports no pydantic

        sections = self.kinds.sections()
        if len(sections) == 1:  # a discriminator needs a union of two or more
            return sections[0]
        return typing.Annotated[typing.Union[sections], Field(discriminator="kind")]

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        return handler.generate_schema(self.union())


class EngineSection(Section):
    """Deployment.engine: the registered engine sections."""

    kinds = ENGINES


class TargetSection(Section):
    """Deployment.target: the registered target sections."""

    kinds = TARGETS
