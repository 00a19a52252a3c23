"""Engines' own option sets, rebuilt from committed snapshots: a parser and a checker per engine version.

Standard library only: the test hosts' stand-in engine imports this to accept exactly the real command line.
Snapshots: infra/engines/snapshots/<engine>-<version>.json (vLLM's from its real parser via
scripts/snapshot_vllm.py; TensorRT-LLM's from its source via scripts/snapshot_trtllm.py).
"""
from __future__ import annotations

import argparse
import difflib
import functools
import json
import re
from pathlib import Path
from typing import Any, Callable

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
_FILE_PREFIX = {"vllm": "vllm", "tensorrt-llm": "trtllm"}
# The words of a refusal of a name vLLM checks after parsing (its config classes), not argparse: vLLM exits 1 there.
NOT_A_VALUE = "is not one of this version's values"
# vLLM's post-parse value sets, by option dest (the parser itself takes any string for these).
_VALUE_SETS = {"quantization": "quantization", "kv_cache_dtype": "kv_cache_dtype", "load_format": "load_format"}


class OptionError(ValueError):
    """A command line the engine would refuse."""


class _Parser(argparse.ArgumentParser):
    flexible = False  # vLLM: rewrite argv as FlexibleArgumentParser does before parsing

    def error(self, message: str):  # raise instead of printing usage and exiting
        raise OptionError(message)

    def parse_args(self, args=None, namespace=None):  # noqa: D102 - argparse's, plus vLLM's rewriting
        return super().parse_args(flexible_args(list(args)) if self.flexible else args, namespace)


@functools.lru_cache(maxsize=None)
def snapshot(engine: str, version: str) -> dict:
    """The committed option snapshot for an engine version (raises OptionError when there is none)."""
    path = SNAPSHOTS / f"{_FILE_PREFIX.get(engine, engine)}-{version}.json"
    if not path.is_file():
        have = sorted(p.stem for p in SNAPSHOTS.glob("*.json"))
        raise OptionError(f"no option snapshot for {engine} {version} (have: {', '.join(have)})")
    return json.loads(path.read_text())


def _human_int(text: str) -> int:
    """vLLM's human_readable_int (vllm/utils/argparse_utils.py): k/m/g/t multiply by 1000s (decimals allowed),
    K/M/G/T by 1024s (whole numbers only), else a plain int."""
    value = text.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if not m:
        return int(value)
    number, suffix = m.groups()
    if suffix.islower():
        return int(float(number) * 10 ** (3 * "kmgt".index(suffix) + 3))
    return int(number) * 2 ** (10 * "KMGT".index(suffix) + 10)  # int("1.5") raises, as vLLM refuses it


def _si_iec_int(text: str) -> int:
    """SGLang's human_readable_int (sglang/srt/utils/common.py): SI k/M/G/T (decimals allowed) and IEC
    Ki/Mi/Gi/Ti (whole numbers only), case-sensitive, else a plain int."""
    value = text.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if not m:
        return int(value)
    number, suffix = m.groups()
    if len(suffix) == 2:
        return int(number) * 2 ** (10 * "KMGT".index(suffix[0]) + 10)  # int("1.5") raises, as SGLang refuses it
    return int(float(number) * 10 ** (3 * "kMGT".index(suffix) + 3))


def _json(text: str) -> Any:
    return json.loads(text)


def _bool(text: str) -> bool:
    if text.lower() not in ("true", "false", "1", "0"):
        raise ValueError(f"expected true or false, got {text!r}")
    return text.lower() in ("true", "1")


_TYPES: dict[str, Callable[[str], Any]] = {
    "int": int, "float": float, "str": str, "json": _json, "human_int": _human_int, "bool": _bool,
    "si_iec_int": _si_iec_int,
}


def _type_fn(opt: dict, snap: dict) -> Callable[[str], Any]:
    base = _TYPES[opt.get("type") or "str"]
    choices = opt.get("choices")
    allowed = snap.get("values", {}).get(_VALUE_SETS.get(opt["dest"], ""), None)
    check_spec = opt["dest"] == "speculative_config" and "speculative_config.keys" in snap.get("values", {})
    group_keys = snap.get("values", {}).get(f"{opt['dest']}.keys") if opt.get("type_name") == "parse_dataclass" else None

    optional = opt.get("type_name") == "_optional_type" and (choices is None or "None" in choices)
    auto = opt.get("type_name") == "human_readable_int_or_auto"

    def convert(text: str) -> Any:
        if optional and text in ("", "None"):  # vLLM's optional_type: unset
            return None
        if auto and text.strip().lower() in ("auto", "-1"):  # human_readable_int_or_auto
            return -1
        if choices is not None and text not in choices:
            raise argparse.ArgumentTypeError(f"invalid choice {text!r} (choose from {', '.join(choices)})")
        if allowed is not None and text not in allowed:
            raise argparse.ArgumentTypeError(f"{text!r} {NOT_A_VALUE} ({', '.join(allowed)})")
        value = base(text)
        if check_spec:
            _check_speculative(value, snap["values"])
        if group_keys is not None:
            _check_group(text, group_keys)
        return value

    convert.__name__ = opt.get("type") or "str"  # argparse names the type in its messages
    return convert


def _check_speculative(value: Any, values: dict) -> None:
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    unknown = sorted(set(value) - set(values["speculative_config.keys"]))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown speculative-config keys: {', '.join(unknown)}")
    if "method" in value and value["method"] not in values["speculative_config.method"]:
        raise argparse.ArgumentTypeError(f"unknown speculative method {value['method']!r}")


def _check_group(text: str, keys: list[str]) -> None:
    # vLLM's parse_dataclass: human-readable numbers expanded outside strings, then the config class (a
    # pydantic dataclass that forbids extra keys) validates the JSON object.
    parts = re.split(r'("(?:[^"\\]|\\.)*")', text)
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"\b\d+(?:\.\d+)?[kKmMgGtT]\b", lambda m: str(_human_int(m.group())), parts[i])
    value = json.loads("".join(parts))
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    for key in sorted(set(value) - set(keys)):
        close = difflib.get_close_matches(key, keys, n=1)
        raise argparse.ArgumentTypeError(f"unknown key {key!r}" + (f" (did you mean {close[0]}?)" if close else ""))


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


def parser_traits(engine: str, snap: dict) -> dict:
    """How the engine's CLI parses: the snapshot's `parser` entry (prog, allow_abbrev, flexible), else the
    traits of the snapshots written before it had one (vLLM's FlexibleArgumentParser, TensorRT-LLM's click)."""
    vllm = engine == "vllm"
    # argparse's default allow_abbrev (vLLM keeps it: a unique prefix works); click matches names exactly.
    old = {"prog": "vllm serve" if vllm else "trtllm-serve", "allow_abbrev": vllm, "flexible": vllm}
    return {**old, **snap.get("parser", {})}


@functools.lru_cache(maxsize=8)  # built once per version: parse_args leaves a parser as it was
def parser(engine: str, version: str) -> argparse.ArgumentParser:
    """An argparse parser that accepts what the engine's server command of that version accepts."""
    snap = snapshot(engine, version)
    traits = parser_traits(engine, snap)
    p = _Parser(prog=traits["prog"], add_help=False, allow_abbrev=traits["allow_abbrev"])
    p.flexible = traits["flexible"]
    for opt in snap["options"]:
        _add(p, opt, snap)
    return p


def flexible_args(args: list[str]) -> list[str]:
    """argv as vLLM's FlexibleArgumentParser.parse_args rewrites it before argparse sees it
    (vllm/utils/argparse_utils.py): `_` -> `-` in names up to the first dot, -O3 / -O 3 -> --optimization-level,
    dot keys (--a.b.c V, --a.b=V, list append --a.b+ x,y) merged into one JSON value per option."""
    if "--config" in args:  # vLLM would read a YAML file on the host; inferry ships none
        raise OptionError("--config reads a YAML file on the GPU host, which inferry does not ship: "
                          "write its options as flags instead")
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg.startswith("--"):
            key, eq, value = arg.partition("=")
            out.append(re.sub(r"(?<=--)[^.]*", lambda m: m.group(0).replace("_", "-"), key, count=1) + eq + value)
        elif arg.startswith("-O") and arg != "-O":
            out += ["--optimization-level", arg[3:] if arg[2] == "=" else arg[2:]]
        elif arg == "-O" and i + 1 < len(args) and args[i + 1] in {"0", "1", "2", "3"}:
            out.append("--optimization-level")
        else:
            out.append(arg)
    return _merge_dot_keys(out)


def _merge_dot_keys(args: list[str]) -> list[str]:
    dicts: dict[str, dict] = {}
    skip: set[int] = set()
    for i, arg in enumerate(args):
        if i in skip or (arg.startswith("--") and "." not in arg) or not (arg.startswith("-") and "." in arg):
            continue
        if "=" in arg:
            arg, value = arg.split("=", 1)
            if "." not in arg:  # the dot was in the value only
                continue
        elif i + 1 < len(args):
            value = args[i + 1]
            skip.add(i + 1)
        else:  # vLLM reads past the end here (IndexError): it does not start
            raise OptionError(f"{arg} expects a value")
        if arg.endswith("+"):
            arg, value = arg[:-1], json.dumps(value.split(","))
        key, *keys = arg.split(".")
        nested: Any = _dot_value(value)
        for k in reversed(keys):
            nested = {k: nested}
        _deep_update(dicts.setdefault(key, {}), nested)
        skip.add(i)
    kept = [a for i, a in enumerate(args) if i not in skip]
    return kept + [x for key, value in dicts.items() for x in (key, json.dumps(value))]


def _dot_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        try:  # vLLM: human-readable numbers for dotted values (--x.y 80g), else the string
            return _human_int(text)
        except ValueError:
            return text


def _deep_update(original: dict, update: dict) -> None:
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(original.get(k), dict):
            _deep_update(original[k], v)
        elif isinstance(v, list) and isinstance(original.get(k), list):
            original[k] += v
        else:
            original[k] = v


def parse(engine: str, version: str, args: list[str] | tuple[str, ...]) -> argparse.Namespace:
    """The namespace the engine's parser makes of a command line (raises OptionError when it refuses it)."""
    return parser(engine, version).parse_args(list(args))


def check_args(engine: str, version: str, args: list[str] | tuple[str, ...]) -> list[str]:
    """Every problem with a command line (flags after the subcommand) for that engine version; [] if none."""
    try:
        p = parser(engine, version)
        tokens = flexible_args(list(args)) if p.flexible else list(args)
    except OptionError as e:
        return [str(e)]
    problems = [_unknown(p, t) for t in tokens if t.startswith("--") and not _known(p, t.split("=", 1)[0])]
    if problems:
        return problems
    try:
        p.parse_args(list(args))
    except OptionError as e:
        problems.append(str(e))
    return problems


def abbreviations(engine: str, version: str, args: list[str] | tuple[str, ...]) -> list[tuple[str, str]]:
    """(token, full option) for each option written as a prefix that the parser expands."""
    p = parser(engine, version)
    tokens = flexible_args(list(args)) if p.flexible else list(args)
    found = []
    for t in tokens:
        key = t.split("=", 1)[0]
        if t.startswith("--") and key not in p._option_string_actions and len(_prefixed(p, key)) == 1:
            found.append((key, _prefixed(p, key)[0]))
    return found


def _prefixed(p: argparse.ArgumentParser, key: str) -> list[str]:
    return sorted(o for o in p._option_string_actions if o.startswith(key)) if p.allow_abbrev else []


def _known(p: argparse.ArgumentParser, key: str) -> bool:
    return key in p._option_string_actions or len(_prefixed(p, key)) == 1 or re.fullmatch(r"--?\d.*", key) is not None


def _unknown(p: argparse.ArgumentParser, token: str) -> str:
    key = token.split("=", 1)[0]
    if len(_prefixed(p, key)) > 1:
        return f"ambiguous option {key} (could be {', '.join(_prefixed(p, key)[:5])})"
    close = difflib.get_close_matches(key, list(p._option_string_actions), n=1)
    return f"unknown option {key}" + (f" (did you mean {close[0]}?)" if close else "")


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
