"""engine.extra_options values against the types TensorRT-LLM's --config classes declare (the snapshot's
yaml.types, read from llm_args.py): one Problem per wrong value, by its key path."""
from __future__ import annotations

from typing import Any

from infra.errors import Problem
from infra.stack.problems import NUMBER, did_you_mean, key_text, short

PREFIX = "engine.extra_options"
WORDS = {"int": "a whole number", "float": "a number", "bool": "true or false", "str": "a string", "null": "null"}


def expected(spec: Any) -> str:
    """A type spec in the user's words."""
    if isinstance(spec, str):
        return WORDS.get(spec, "anything")
    if "enum" in spec:
        return "one of " + ", ".join(repr(v) for v in spec["enum"])
    if "list" in spec:
        return f"a list of {_plural(spec['list'])}"
    if "dict" in spec:
        return f"a mapping of {_plural(spec['dict'])}"
    if "model" in spec:
        return f"a mapping ({spec['model']})"
    members = sorted(spec["anyOf"], key=lambda m: m == "null")  # "or null" last
    return " or ".join(expected(m) for m in members)


def _plural(spec: Any) -> str:
    return {"int": "whole numbers", "float": "numbers", "str": "strings", "bool": "true/false values"}.get(
        spec, expected(spec)) if isinstance(spec, str) else expected(spec)


def _scalar_ok(spec: str, value: Any) -> bool:
    # Nothing is coerced, as everywhere in a stack file: "8" is not a whole number, 1 is not true.
    if spec == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if spec == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    checks = {"bool": bool, "str": str, "null": type(None)}
    return spec not in checks or isinstance(value, checks[spec])


def wrong(spec: Any, value: Any, path: str, types: dict, owner: str = "") -> list[tuple[str, Any, Any, str]]:
    """(path, spec, value, Class.field) for each value its spec refuses, looking into lists, mappings and
    classes; an unknown key's spec is {"unknown": the class's keys}."""
    if isinstance(spec, str):
        return [] if _scalar_ok(spec, value) else [(path, spec, value, owner)]
    if "enum" in spec:
        ok = any(value == v and type(value) is type(v) for v in spec["enum"])
        return [] if ok else [(path, spec, value, owner)]
    if "anyOf" in spec:
        if any(not wrong(m, value, path, types, owner) for m in spec["anyOf"]):
            return []
        inner = [m for m in spec["anyOf"] if m != "null"]
        # Optional[X] with a value that is no null: what is wrong inside X, by its own path.
        if len(inner) == 1 and value is not None:
            return wrong(inner[0], value, path, types, owner)
        return [(path, spec, value, owner)]
    if "list" in spec:
        if not isinstance(value, list):
            return [(path, spec, value, owner)]
        return [w for i, v in enumerate(value) for w in wrong(spec["list"], v, f"{path}[{i}]", types, owner)]
    if not isinstance(value, dict):
        return [(path, spec, value, owner)]
    if "dict" in spec:
        return [w for k, v in value.items() for w in wrong(spec["dict"], v, f"{path}.{key_text(k)}", types, owner)]
    return _model_wrong(spec["model"], value, path, types)


def _model_wrong(model: str, value: dict, path: str, types: dict) -> list[tuple[str, Any, Any, str]]:
    fields, found = types.get(model, {}), []
    # The top level's and the KV cache's unknown keys are options.check_yaml's to report (stdlib only, for the
    # stand-in engine); the other classes forbid extra keys as well.
    listed = path == PREFIX or model == "KvCacheConfig"
    for k, v in value.items():
        where = f"{path}.{key_text(k)}"
        if k in fields:
            found += wrong(fields[k], v, where, types, f"{model}.{k}")
        elif not listed:
            found.append((where, {"unknown": sorted(fields)}, k, model))
    return found


def _hint(spec: Any, value: Any, owner: str, version: str) -> str:
    """How to write the value: unquoted, the closest choice, or the type and where TensorRT-LLM declares it."""
    scalar = spec if isinstance(spec, str) else next((m for m in spec.get("anyOf", ()) if m != "null"), None)
    if scalar in ("int", "float") and isinstance(value, str) and NUMBER.match(value.strip()):
        return f"write {value.strip()} without quotes"
    if scalar == "bool" and isinstance(value, str):
        return "write true or false, unquoted"
    if isinstance(spec, dict) and "enum" in spec and isinstance(value, str):
        guess = did_you_mean(value, [str(v) for v in spec["enum"]])
        if guess:
            return guess
    return f"set it as TensorRT-LLM {version}'s {owner} takes it, or remove it"


def type_problems(snapshot_yaml: dict, version: str, backend: str, options: dict) -> list[Problem]:
    """Every extra_options value of the wrong type for the backend's args class, one Problem each."""
    types = snapshot_yaml.get("types")
    if not types:  # a snapshot made before types were recorded: keys are still checked
        return []
    cls = "TorchLlmArgs" if backend == "pytorch" else "TrtLlmArgs"
    return [_problem(path, spec, value, owner, version)
            for path, spec, value, owner in wrong({"model": cls}, options, PREFIX, types)]


def _problem(path: str, spec: Any, value: Any, owner: str, version: str) -> Problem:
    if isinstance(spec, dict) and "unknown" in spec:
        hint = did_you_mean(value, spec["unknown"]) or f"{owner} keys: {', '.join(spec['unknown'])}"
        return Problem(path, f"unknown key (TensorRT-LLM {version} {owner})", hint=hint)
    return Problem(path, f"expected {expected(spec)}", short(value), hint=_hint(spec, value, owner, version))
