"""Engines' own option sets, rebuilt from committed snapshots: a parser and a checker per engine version.

Standard library only: the test hosts' stand-in engine imports this to accept exactly the real command line.
Snapshots: infra/engines/snapshots/<engine>-<version>.json (vLLM's from its real parser via
scripts/snapshot_vllm.py; TensorRT-LLM's from its source via scripts/snapshot_trtllm.py).
"""
from __future__ import annotations

import argparse
import functools
import json
import re
from pathlib import Path
from typing import Any, Callable

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
_FILE_PREFIX = {"vllm": "vllm", "tensorrt-llm": "trtllm"}
# vLLM's post-parse value sets, by option dest (the parser itself takes any string for these).
_VALUE_SETS = {"quantization": "quantization", "kv_cache_dtype": "kv_cache_dtype", "load_format": "load_format"}


class OptionError(ValueError):
    """A command line the engine would refuse."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # raise instead of printing usage and exiting
        raise OptionError(message)


@functools.lru_cache(maxsize=None)
def snapshot(engine: str, version: str) -> dict:
    """The committed option snapshot for an engine version (raises OptionError when there is none)."""
    path = SNAPSHOTS / f"{_FILE_PREFIX.get(engine, engine)}-{version}.json"
    if not path.is_file():
        have = sorted(p.stem for p in SNAPSHOTS.glob("*.json"))
        raise OptionError(f"no option snapshot for {engine} {version} (have: {', '.join(have)})")
    return json.loads(path.read_text())


def _human_int(text: str) -> int:
    # vLLM's human_readable_int: digits with an optional k/m/g (x1000) or K/M/G (x1024) suffix.
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmgtKMGT]?)", text.strip())
    if text.strip() == "auto" or text.strip() == "-1":
        return -1
    if not m:
        raise ValueError(f"not a number with an optional k/m/g suffix: {text!r}")
    num, unit = m.groups()
    scale = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
             "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[unit]
    value = float(num) * scale
    if value != int(value):
        raise ValueError(f"not a whole number of tokens: {text!r}")
    return int(value)


def _json(text: str) -> Any:
    return json.loads(text)


def _bool(text: str) -> bool:
    if text.lower() not in ("true", "false", "1", "0"):
        raise ValueError(f"expected true or false, got {text!r}")
    return text.lower() in ("true", "1")


_TYPES: dict[str, Callable[[str], Any]] = {
    "int": int, "float": float, "str": str, "json": _json, "human_int": _human_int, "bool": _bool,
}


def _type_fn(opt: dict, snap: dict) -> Callable[[str], Any]:
    base = _TYPES[opt.get("type") or "str"]
    choices = opt.get("choices")
    allowed = snap.get("values", {}).get(_VALUE_SETS.get(opt["dest"], ""), None)
    check_spec = opt["dest"] == "speculative_config" and "speculative_config.keys" in snap.get("values", {})

    def convert(text: str) -> Any:
        if choices is not None and text not in choices:
            raise ValueError(f"invalid choice {text!r} (choose from {', '.join(choices)})")
        if allowed is not None and text not in allowed:
            raise ValueError(f"{text!r} is not one of this version's values ({', '.join(allowed)})")
        value = base(text)
        if check_spec:
            _check_speculative(value, snap["values"])
        return value

    convert.__name__ = opt.get("type") or "str"  # argparse names the type in its messages
    return convert


def _check_speculative(value: Any, values: dict) -> None:
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    unknown = sorted(set(value) - set(values["speculative_config.keys"]))
    if unknown:
        raise ValueError(f"unknown speculative-config keys: {', '.join(unknown)}")
    if "method" in value and value["method"] not in values["speculative_config.method"]:
        raise ValueError(f"unknown speculative method {value['method']!r}")


class _EnableDisable(argparse.Action):
    """--enable-x / --disable-x (vLLM's EnableDisableAction); --no-x for click-style switches."""

    def __init__(self, option_strings, dest, **kw):
        kw.pop("nargs", None)
        super().__init__(option_strings, dest, nargs=0, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, not (option_string or "").startswith(("--disable-", "--no-")))


def _add(p: argparse.ArgumentParser, opt: dict, snap: dict) -> None:
    action, flags = opt["action"], opt["flags"]
    if not flags:
        p.add_argument(opt["dest"], nargs=opt.get("nargs"), type=_type_fn(opt, snap))
    elif action in ("_StoreTrueAction", "_StoreFalseAction"):
        p.add_argument(*flags, dest=opt["dest"], action="store_true" if "True" in action else "store_false")
    elif action in ("EnableDisableAction", "BooleanOptionalAction"):
        p.add_argument(*flags, dest=opt["dest"], action=_EnableDisable)
    elif action == "_AppendAction":
        p.add_argument(*flags, dest=opt["dest"], action="append", type=_type_fn(opt, snap))
    else:  # every other store-like action takes values as snapshotted
        p.add_argument(*flags, dest=opt["dest"], nargs=opt.get("nargs"), type=_type_fn(opt, snap))


def parser(engine: str, version: str) -> argparse.ArgumentParser:
    """An argparse parser that accepts what `vllm serve` / `trtllm-serve` of that version accepts."""
    snap = snapshot(engine, version)
    prog = "vllm serve" if engine == "vllm" else "trtllm-serve"
    p = _Parser(prog=prog, add_help=False, allow_abbrev=False)
    for opt in snap["options"]:
        _add(p, opt, snap)
    return p


def check_args(engine: str, version: str, args: list[str] | tuple[str, ...]) -> list[str]:
    """Every problem with a command line (flags after the subcommand) for that engine version; [] if none."""
    try:
        p = parser(engine, version)
    except OptionError as e:
        return [str(e)]
    problems = []
    for token in args:
        if token.startswith("--") and "=" not in token and not _known(p, token):
            problems.append(f"unknown option {token}")
    if problems:
        return problems
    try:
        p.parse_args(list(args))
    except OptionError as e:
        problems.append(str(e))
    return problems


def _known(p: argparse.ArgumentParser, token: str) -> bool:
    return token in p._option_string_actions or re.fullmatch(r"--?\d.*", token) is not None


def check_yaml(version: str, config: dict, backend: str = "pytorch") -> list[str]:
    """Every problem with a TensorRT-LLM --config YAML mapping: unknown keys (its models forbid extras)."""
    try:
        schema = snapshot("tensorrt-llm", version)["yaml"]
    except OptionError as e:
        return [str(e)]
    top = set(schema["TorchLlmArgs" if backend == "pytorch" else "TrtLlmArgs"])
    problems = [f"unknown key {k!r} for the {backend} backend" for k in sorted(config) if k not in top]
    kv = config.get("kv_cache_config") or {}
    problems += [f"unknown key kv_cache_config.{k}" for k in sorted(kv) if k not in schema["KvCacheConfig"]]
    spec = config.get("speculative_config")
    if spec is not None:
        problems += _check_trt_speculative(spec, schema["speculative_config"], backend)
    return problems


def _check_trt_speculative(spec: dict, kinds: dict, backend: str) -> list[str]:
    kind = kinds.get(spec.get("decoding_type", ""))
    if kind is None:
        return [f"speculative_config.decoding_type must be one of {', '.join(sorted(kinds))}"]
    problems = [f"unknown key speculative_config.{k}" for k in sorted(spec) if k not in kind["keys"]]
    if backend not in kind["backends"]:
        problems.append(f"decoding_type {spec['decoding_type']} does not support the {backend} backend")
    return problems
