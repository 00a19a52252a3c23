"""Turn pydantic validation errors into one readable Problem per field, with did-you-mean."""
from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from infra.errors import Problem

# Field names whose values are secrets: never echo what was found there.
SECRET_FIELDS = {"private_key", "api_key", "access_key_id", "secret_access_key", "hf_token"}
# Discriminated unions put the tag in the error location; users never write it.
UNION_TAGS = {"engine": {"vllm", "tensorrt-llm"}, "target": {"ssh", "kubernetes"}}


def _unwrap(tp: Any, part: str | int) -> Any:
    """The type one step below tp along a location part."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0], part)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        for m in members:  # a discriminator tag selects the member
            if isinstance(m, type) and issubclass(m, BaseModel):
                kind = m.model_fields.get("kind")
                if kind is not None and part in typing.get_args(kind.annotation):
                    return m
        return members[0] if len(members) == 1 else None
    if origin in (list, dict):
        return typing.get_args(tp)[-1]
    if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(part, str):
        field = tp.model_fields.get(part)
        return field.annotation if field else None
    return None


def model_at(root: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The model class that holds the field at loc (its parent), if any."""
    tp: Any = root
    for part in loc[:-1]:
        tp = _unwrap(tp, part)
        if tp is None:
            return None
        tp = _unwrap_optional_model(tp)
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def _unwrap_optional_model(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    if origin is typing.Annotated:
        return _unwrap_optional_model(typing.get_args(tp)[0])
    return tp


def display_path(loc: tuple, prefix: str = "") -> str:
    """A dotted path as the user wrote it: tags dropped, list indexes in brackets."""
    parts: list[str] = []
    for i, part in enumerate(loc):
        if i == 1 and parts and part in UNION_TAGS.get(parts[0], ()):
            continue
        if isinstance(part, int):
            parts[-1] = f"{parts[-1]}[{part}]" if parts else f"[{part}]"
        elif part and not str(part).startswith("function-"):
            parts.append(str(part))
    path = ".".join(parts)
    return f"{prefix}.{path}" if prefix and path else (prefix or path)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_secret(loc: tuple) -> bool:
    return any(isinstance(p, str) and p in SECRET_FIELDS for p in loc)


def problem_from_error(root: type[BaseModel], err: dict, prefix: str = "") -> Problem:
    """One pydantic error as a Problem."""
    loc, kind = tuple(err["loc"]), err["type"]
    path = display_path(loc, prefix)
    secret = _is_secret(loc)
    found = None if secret else _short(err.get("input"))
    if kind == "missing":
        return Problem(path, "required field is missing", hint="add it")
    if kind == "extra_forbidden":
        parent = model_at(root, loc)
        names = list(parent.model_fields) if parent else []
        guess = difflib.get_close_matches(str(loc[-1]), names, n=1, cutoff=0.6)
        hint = f"did you mean '{guess[0]}'?" if guess else (f"expected one of: {', '.join(names)}" if names else None)
        return Problem(path, "unknown key", hint=hint)
    if secret and kind in ("model_type", "model_attributes_type", "dict_type"):
        return Problem(path, "secret written in plain text; expected {config: KEY} or {env: VAR}",
                       hint="run `pulumi config set --secret KEY` (or export a variable) and reference it here")
    if kind == "union_tag_invalid":
        expected = err.get("ctx", {}).get("expected_tags", "")
        return Problem(path + ".kind" if not path.endswith("kind") else path,
                       f"unknown kind; expected one of {expected}", found)
    if kind == "union_tag_not_found":
        return Problem(path + ".kind", "required field is missing", hint="add kind")
    if kind == "string_pattern_mismatch":
        return _pattern_problem(root, loc, path, err, found)
    message = err["msg"].removeprefix("Value error, ")
    return Problem(path, message, found)


def _pattern_problem(root: type[BaseModel], loc: tuple, path: str, err: dict, found: str | None) -> Problem:
    """A value of the wrong form: what the field holds (its description) and the exact rule."""
    parent = model_at(root, loc)
    field = parent.model_fields.get(str(loc[-1])) if parent else None
    what = f"expected {field.description}" if field and field.description else "not an allowed value"
    return Problem(path, what, found, hint=f"use a value matching {err.get('ctx', {}).get('pattern', '')}")


def problems_from_validation(root: type[BaseModel], exc: ValidationError, prefix: str = "") -> list[Problem]:
    """Every error of a ValidationError, as Problems, in document order."""
    return [problem_from_error(root, e, prefix) for e in exc.errors(include_url=False)]
