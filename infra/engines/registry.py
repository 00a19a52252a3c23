"""The engines inferry knows, by `engine.kind`: the one place a kind becomes an engine."""
from __future__ import annotations

import difflib

from infra.engines import sglang, trtllm, vllm
from infra.engines.common import telemetry_switches
from infra.engines.contract import Engine
from infra.errors import InferryError
from infra.stack.config import Deployment

ENGINES: tuple[Engine, ...] = (vllm.ENGINE, trtllm.ENGINE, sglang.ENGINE)


def kinds() -> tuple[str, ...]:
    """Every registered engine kind, in registry order."""
    return tuple(e.kind for e in ENGINES)


def engine_for(kind: str) -> Engine:
    """The engine registered for a kind; an unknown kind is an InferryError with a did-you-mean."""
    for e in ENGINES:
        if e.kind == kind:
            return e
    close = difflib.get_close_matches(kind, kinds(), n=1)
    hint = (f"did you mean {close[0]!r}? " if close else "") + f"known engines: {', '.join(kinds())}"
    raise InferryError(f"unknown engine.kind {kind!r}", hint, where="engine.kind")


def expected_switches(d: Deployment) -> dict[str, str]:
    """The telemetry switches the stack's engine must run with (what the record checks on every replica)."""
    return telemetry_switches(d, *engine_for(d.engine.kind).usage_off)
