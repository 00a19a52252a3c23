"""Pulumi engine events as readable progress lines (one line per step, not a JSON stream)."""
from __future__ import annotations

import re

from pulumi.automation import EngineEvent

from infra.lifecycle.deployer import Changes

# Present participle before a step, past tense after it.
_VERBS = {
    "create": ("creating", "created"), "update": ("updating", "updated"), "delete": ("deleting", "deleted"),
    "replace": ("replacing", "replaced"), "create-replacement": ("creating replacement", "created replacement"),
    "delete-replaced": ("deleting replaced", "deleted replaced"), "read": ("reading", "read"),
    "refresh": ("refreshing", "refreshed"), "import": ("importing", "imported"),
}
_QUIET_TYPES = ("pulumi:pulumi:Stack", "pulumi:providers:")


def _name(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def _short_type(typ: str) -> str:
    # Dynamic resources all share one type token; their URN's type chain says nothing more useful.
    return "dynamic" if typ == "pulumi-python:dynamic:Resource" else typ


def _step(meta, done: bool, preview: bool) -> str | None:
    op = str(getattr(meta.op, "value", meta.op))
    if op == "same" or meta.type.startswith(_QUIET_TYPES) or (preview and done):
        return None
    verbs = _VERBS.get(op, (op, op))
    diffs = f" ({', '.join(meta.diffs)})" if (not done and meta.diffs) else ""
    verb = f"would {op}" if preview else verbs[1] if done else verbs[0]
    return f"  {verb} {_short_type(meta.type)} {_name(meta.urn)}{diffs}"


def _diagnostic(d) -> str | None:
    if d.ephemeral or d.severity == "debug":
        return None
    text = d.message.strip()
    if not text:
        return None
    where = f"{_name(d.urn)}: " if d.urn and not d.urn.endswith("pulumi:pulumi:Stack") else ""
    if d.severity == "error":
        return f"  error: {where}{text}"
    if d.severity == "warning":
        return f"  warning: {where}{text}"
    return f"  {where}{text}"


def _summary(s) -> str:
    counts = Changes({str(getattr(k, "value", k)): v for k, v in s.resource_changes.items()})
    parts = [f"{n} {'unchanged' if op == 'same' else _VERBS.get(op, (op, op))[1]}" for op, n in counts.ordered()]
    return f"done in {s.duration_seconds}s: {', '.join(parts) or 'no resources'}"


# Lines the engine adds to every failure; the cause is in the other error diagnostics.
_BOILERPLATE = ("update failed", "preview failed", "destroy failed", "refresh failed",
                "Resource monitor has terminated, shutting down")


def failure(event: EngineEvent) -> str | None:
    """An error diagnostic's text with the resource it concerns, or None (not an error, or boilerplate)."""
    d = event.diagnostic_event
    if d is None or d.severity != "error":
        return None
    # The engine repeats a program's own error as "an unhandled error occurred: ..."
    text = d.message.strip().removeprefix("an unhandled error occurred: ")
    text = re.sub(r"^infra\.errors\.\w+: ", "", text)  # the provider host's traceback line names the class
    if not text or text in _BOILERPLATE:
        return None
    where = f"{_name(d.urn)}: " if d.urn and not d.urn.endswith(f"pulumi:pulumi:Stack::{_name(d.urn)}") else ""
    return f"{where}{text}"


def describe(event: EngineEvent, preview: bool = False) -> str | None:
    """One readable line for an engine event, or None for events not worth a line (a preview changes
    nothing: one 'would OP' line per step, no summary)."""
    if event.resource_pre_event:
        return _step(event.resource_pre_event.metadata, False, preview)
    if event.res_outputs_event:
        return _step(event.res_outputs_event.metadata, True, preview)
    if event.res_op_failed_event:
        meta = event.res_op_failed_event.metadata
        return f"  failed {_short_type(meta.type)} {_name(meta.urn)}"
    if event.diagnostic_event:
        return _diagnostic(event.diagnostic_event)
    if event.summary_event and not preview:
        return _summary(event.summary_event)
    return None
