"""Engines: the stack's engine section -> a ServiceSpec, through the engine its kind names (registry.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # kept out of import time: infra.engines.options must import with the standard library only
    from infra.stack.config import Deployment
    from infra.engines.spec import ServiceSpec


def service_spec(d: Deployment, model_dir: str | None = None, **kw) -> ServiceSpec:
    """The service for a deployment's engine; model_dir: where the target put weights."""
    from infra.engines.registry import engine_for

    return engine_for(d.engine.kind).service_spec(d, model_dir, **kw)
