"""Turn pydantic validation errors into one readable Problem per field, with did-you-mean."""
from __future__ import annotations

import copy
import dataclasses
import difflib
import re
import reprlib
import types
import typing
from typing import Any

from pydantic import BaseModel, Tag, ValidationError

from infra.stack.kinds import Section, engine_kinds, target_kinds
from infra.stack.secretfix import plain_text_fix
from infra.errors import Problem

# Field names whose values are secrets: never echo what was found there.
SECRET_FIELDS = {"private_key", "api_key", "access_key_id", "secret_access_key", "hf_token", "previous_api_key",
                 "certificate_key", "eab_hmac_key"}
# Discriminated unions put the tag in the error location; users never write it.
FIXED_TAGS = {"provider.gpu": {"catalog", "declared"}}


def union_tags() -> dict[str, set[str]]:
    """Each discriminated union's tags by field path (the engine and target kinds as registered)."""
    return {"engine": set(engine_kinds()), "target": set(target_kinds()), **FIXED_TAGS}


def _tag_names() -> set[str]:
    return set().union(*union_tags().values())


# A key shown as written when it is this plain; anything else (empty, spaces, control characters) is quoted.
PLAIN_KEY = re.compile(r"^[A-Za-z0-9_.:/\-]{1,40}$")
# At most this many problems are listed: the first ones say what is wrong; thousands say nothing more.
MAX_PROBLEMS = 50
# A quoted string that holds a number: the hint says to drop the quotes.
NUMBER = re.compile(r"^[-+]?[0-9][0-9_]*(\.[0-9_]*)?([eE][-+]?[0-9]+)?$")
# What strict (never coerced) types expect, in the user's words.
EXPECTED = {"int_type": "a whole number", "float_type": "a number", "bool_type": "true or false",
            "string_type": "a string", "list_type": "a list", "dict_type": "a mapping",
            "model_type": "a mapping", "model_attributes_type": "a mapping"}


class _Bounded(reprlib.Repr):
    """reprlib with a size cap on integers too: repr() of a 5000-digit int raises, a 400-digit one is noise."""

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() <= 128:
            return repr(x)
        digits = int(x.bit_length() * 0.30103)  # log10(2): the count is this or one more
        return f"<an integer of {digits + (abs(x) >= 10**digits)} digits>"


_BOUNDED = _Bounded()
_BOUNDED.maxlevel, _BOUNDED.maxstring, _BOUNDED.maxother = 2, 40, 40
_BOUNDED.maxlist = _BOUNDED.maxdict = _BOUNDED.maxset = _BOUNDED.maxtuple = 4


def short(value: Any) -> str:
    """A repr of at most about 60 characters, in time bounded whatever the value (alias bombs included)."""
    text = _BOUNDED.repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def key_text(key: Any) -> str:
    """A mapping key as a path part: plain keys as written, others quoted and shortened."""
    return key if isinstance(key, str) and PLAIN_KEY.match(key) else short(key)


def closest(word: Any, options: Any) -> str | None:
    """The closest of options to word, if any is close."""
    match = difflib.get_close_matches(str(word)[:100], sorted(options), n=1, cutoff=0.6)
    return match[0] if match else None


def did_you_mean(word: Any, options: Any) -> str | None:
    """'did you mean X?' for the one of options that differs from word only in case, else the closest."""
    match = {str(o).lower(): o for o in options}.get(str(word).lower()) or closest(word, options)
    return f"did you mean '{match}'?" if match else None


def bounded(p: Problem) -> Problem:
    """The problem with its found value cut to a short length (checks may put a whole user value there)."""
    if p.found is None or len(p.found) <= 80:
        return p
    return dataclasses.replace(p, found=p.found[:77] + "...")


def _unwrap(tp: Any, part: str | int) -> Any:
    """The type one step below tp along a location part."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0], part)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        for m in members:  # a discriminator tag selects the member
            if typing.get_origin(m) is typing.Annotated:
                inner, *meta = typing.get_args(m)
                if any(isinstance(x, Tag) and x.tag == part for x in meta):
                    return inner
            if isinstance(m, type) and issubclass(m, BaseModel):
                kind = m.model_fields.get("kind")
                if kind is not None and part in typing.get_args(kind.annotation):
                    return m
        return members[0] if len(members) == 1 else None
    if origin in (list, dict):
        return typing.get_args(tp)[-1]
    if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(part, str):
        field = tp.model_fields.get(part)
        if field is None:
            return None
        section = next((m for m in field.metadata if isinstance(m, Section)), None)
        return section.union() if section else field.annotation
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
        if parts and part in union_tags().get(".".join(parts), ()):
            continue
        if isinstance(part, int) and parts:
            parts[-1] = f"{parts[-1]}[{part}]"
        elif part == "[key]" or (isinstance(part, str) and part.startswith("function-")):
            continue  # pydantic's own markers, not something the user wrote
        else:
            parts.append(key_text(part))
    path = ".".join(parts)
    return f"{prefix}.{path}" if prefix and path else (prefix or path)


def _is_secret(loc: tuple) -> bool:
    return any(isinstance(p, str) and p in SECRET_FIELDS for p in loc)


def problem_from_error(root: type[BaseModel], err: dict, prefix: str = "") -> Problem:
    """One pydantic error as a Problem."""
    loc, kind = tuple(err["loc"]), err["type"]
    path = display_path(loc, prefix)
    secret = _is_secret(loc)
    # A whole section as the found value says nothing the path does not (and can be long): left out.
    found = None if secret or (isinstance(err.get("input"), dict) and kind not in EXPECTED) else short(err.get("input"))
    if kind == "invalid_key" or loc[-1:] == ("[key]",):
        # The key itself is wrong (1: x): name it as a key, not as a list index.
        key = err.get("input")  # the key itself (its place in loc may hold True as 1)
        parent = display_path(loc[:-1] if kind == "invalid_key" else loc[:-2], prefix)
        return Problem(f"{parent}.{key_text(key)}" if parent else key_text(key), "keys must be strings", found,
                       hint="quote the key or remove it")
    if kind == "missing":
        return Problem(path, "required field is missing", hint="add it")
    if kind == "extra_forbidden":
        parent = model_at(root, loc)
        names = list(parent.model_fields) if parent else []
        hint = did_you_mean(loc[-1], names) or (f"expected one of: {', '.join(names)}" if names else None)
        if loc[-1] == "":
            return Problem(path, "empty key name", hint=hint)
        return Problem(path, "unknown key", hint=hint)
    if secret and kind in ("model_type", "model_attributes_type", "dict_type"):
        return Problem(path, "secret written in plain text; expected {config: KEY} or {env: VAR}",
                       hint=plain_text_fix(path))
    if kind == "union_tag_invalid":
        expected = err.get("ctx", {}).get("expected_tags", "")
        tag = err.get("ctx", {}).get("tag", err.get("input"))
        return Problem(path + ".kind" if not path.endswith("kind") else path,
                       f"unknown kind; expected one of {expected}", short(tag),
                       hint=did_you_mean(tag, re.findall(r"'([^']*)'", expected)))
    if kind == "union_tag_not_found":
        return Problem(path + ".kind", "required field is missing", hint="add kind")
    if kind == "string_pattern_mismatch":
        return _pattern_problem(root, loc, path, err, found)
    if kind in ("literal_error", "enum"):
        return _choice_problem(path, err, found)
    if kind in EXPECTED:
        return Problem(path, f"expected {EXPECTED[kind]}", found, hint=_unquote_hint(kind, err.get("input")))
    message = err["msg"].removeprefix("Value error, ")
    return Problem(path, message, found)


def _unquote_hint(kind: str, value: Any) -> str | None:
    """How to write a value of the expected type, for the usual mistakes: values are never converted."""
    if kind == "bool_type":
        return "write true or false, unquoted (yes, no, on, off, 1 and 0 are not booleans here)"
    if kind in ("int_type", "float_type") and isinstance(value, str) and NUMBER.match(value.strip()):
        return f"write {value.strip()} without quotes"
    if kind == "int_type" and isinstance(value, float):
        return "write a whole number, without a decimal point"
    if kind == "string_type" and value is None:
        return "give it a value (nothing after the colon means null)"
    if kind == "string_type" and isinstance(value, (bool, int, float)):
        return "quote it: a number or true/false is not a string here"
    return None


def choices(expected: str) -> list[str]:
    """The allowed values in pydantic's ctx.expected ("'a', 'b' or 'c'", "8, 16 or 32"), each as written."""
    return [c for c in re.split(r", | or ", expected) if c]


def _choice_problem(path: str, err: dict, found: str | None) -> Problem:
    """A value outside a fixed set (a Literal or an Enum): the set, and the one closest to what was written."""
    allowed = choices(str(err.get("ctx", {}).get("expected", "")))
    value = err.get("input")
    words = {c.strip("'\""): c for c in allowed}
    hint = None
    if isinstance(value, str) and value.strip() in allowed:  # "16" where 16 is allowed
        hint = f"write {value.strip()} without quotes"
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool) and found is not None:
        hint = did_you_mean(value, words)
    return Problem(path, f"expected one of {', '.join(allowed)}", found, hint=hint)


def _pattern_problem(root: type[BaseModel], loc: tuple, path: str, err: dict, found: str | None) -> Problem:
    """A value of the wrong form: what the field holds (its description) and the exact rule."""
    parent = model_at(root, loc)
    field = parent.model_fields.get(str(loc[-1])) if parent else None
    what = f"expected {field.description}" if field and field.description else "not an allowed value"
    extra = field.json_schema_extra if field and isinstance(field.json_schema_extra, dict) else {}
    hint = extra.get("fix") or f"use a value matching {err.get('ctx', {}).get('pattern', '')}"
    return Problem(path, what, found, hint=str(hint))


def problems_from_validation(root: type[BaseModel], exc: ValidationError, prefix: str = "") -> list[Problem]:
    """The errors of a ValidationError as Problems, in document order; at most MAX_PROBLEMS of them."""
    errors = exc.errors(include_url=False)
    problems = [problem_from_error(root, e, prefix) for e in errors[:MAX_PROBLEMS]]
    if len(errors) > MAX_PROBLEMS:
        problems.append(Problem(prefix, f"{len(errors) - MAX_PROBLEMS} more problems not listed",
                                hint="fix the ones above and validate again"))
    return problems


def _tags(err: dict) -> list[str]:
    return re.findall(r"'([^']*)'", str(err.get("ctx", {}).get("expected_tags", "")))


def _node(doc: Any, loc: tuple) -> Any:
    """The value at a pydantic location in the raw document (a union's tag in loc names no key: skipped)."""
    for part in loc:
        if isinstance(doc, dict) and part in doc:
            doc = doc[part]
        elif isinstance(doc, list) and isinstance(part, int) and 0 <= part < len(doc):
            doc = doc[part]
        elif not (isinstance(doc, dict) and (doc.get("kind") == part or part in _tag_names())):
            return None
    return doc


def repaired(root: type[BaseModel], raw: Any, errors: list[dict]) -> Any | None:
    """A copy of raw with each did-you-mean applied (kind: vlm read as vllm, max_model_length as max_model_len)
    and other unknown keys dropped; None when nothing applies. Validating it finds what those errors hid."""
    doc, changed = copy.deepcopy(raw), False
    for err in errors:
        loc = tuple(err["loc"])
        if err["type"] == "union_tag_invalid":
            node, guess = _node(doc, loc), closest(err.get("ctx", {}).get("tag"), _tags(err))
            if isinstance(node, dict) and guess:
                node["kind"], changed = guess, True
        elif err["type"] == "extra_forbidden" and loc:
            parent, model = _node(doc, loc[:-1]), model_at(root, loc)
            if isinstance(parent, dict) and loc[-1] in parent:
                value, changed = parent.pop(loc[-1]), True
                guess = closest(loc[-1], model.model_fields) if model else None
                if guess and guess not in parent:
                    parent[guess] = value
    return doc if changed else None
