"""Everything `inferry validate` checks: the schema, then cross-section checks, then the checks each room
registers (engines, sizing, storage, targets: infra.checks), all reported in one run."""
from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from infra.stack.checkregistry import registered
from infra.stack.checks import cross_checks
from infra.stack.config import Deployment
from infra.errors import ConfigError, InferryError, Problem
from infra.stack.problems import bounded, problems_from_validation, repaired

# Rounds of did-you-mean repair: a kind first, then the keys of the section it selects.
REPAIR_ROUNDS = 3


def findings(d: Deployment, skip: frozenset[str] = frozenset()) -> list[Problem]:
    """All findings for a schema-valid deployment, each found value cut short (checks may quote a whole
    user value there). Sizing knows the memory: where it refuses a field, its fix replaces the engine rule's
    on the same field (one bullet for max_model_len above the model's context, with a fix that fits).
    skip: checks (by name) the caller reports its own way (`plan` shows sizing as a table)."""
    found: list[Problem] = []
    refused: set[str] = set()  # fields an earlier check refused, skipped checks included
    for name, check in registered().items():
        new = [p for p in check(d) if p.severity != "error" or p.path not in refused]
        refused |= {p.path for p in new if p.severity == "error"}
        if name not in skip:
            found += new
    return [bounded(p) for p in found]


def require_valid(d: Deployment, source: str, own: frozenset[str] = frozenset()) -> list[Problem]:
    """The one gate every command that renders, plans or deploys passes: ConfigError with exactly the bullets
    `inferry validate` prints when it would refuse the stack; otherwise its warnings. own: checks (by name)
    whose errors the caller reports its own way when they are the only ones (`plan` shows sizing's)."""
    others = findings(d, skip=own)
    errors = [p for p in findings(d) if p.severity == "error"] if own else \
        [p for p in others if p.severity == "error"]
    if errors and any(p.severity == "error" for p in others):
        raise ConfigError(source, errors)
    return [p for p in others if p.severity != "error"]


def checked(raw: Any) -> tuple[Deployment | None, list[Problem]]:
    """(deployment, problems) for a raw deployment object: the deployment when it has no schema or
    cross-section problem; otherwise every problem found, including those the first ones hid (found on a
    copy with each did-you-mean applied, and by the other checks once the copy is valid)."""
    problems: list[Problem] = []
    for _ in range(REPAIR_ROUNDS):
        try:
            d = Deployment.model_validate(raw)
        except ValidationError as e:
            problems += _new(problems, problems_from_validation(Deployment, e))
            raw = repaired(Deployment, raw, e.errors(include_url=False))
            if raw is None:
                break
            continue
        crossed = _new(problems, cross_checks(d))
        if not problems and not crossed:
            return d, []
        return None, problems + crossed + _new(problems + crossed, _errors(d))
    return None, problems


def _new(seen: list[Problem], more: list[Problem]) -> list[Problem]:
    paths = {p.path for p in seen}
    return [p for p in more if p.path not in paths]


def _errors(d: Deployment) -> list[Problem]:
    """The errors among the findings (warnings wait for a stack that loads)."""
    try:
        return [p for p in findings(d) if p.severity == "error"]
    except InferryError:  # a check that cannot run on this stack: the problems above come first
        return []
