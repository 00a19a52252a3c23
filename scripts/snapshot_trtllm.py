"""Regenerate infra/engines/snapshots/trtllm-VERSION.json: trtllm-serve's options and its --config YAML keys.

TensorRT-LLM has no installable wheel on the development machines, so two sources are supported:
  --source CHECKOUT  a git checkout at the release tag (read with `ast`, nothing imported)
  --wheel            the installed `tensorrt_llm` package (click command and pydantic models introspected)

    python scripts/snapshot_trtllm.py --version 1.2.1 --source ~/src/TensorRT-LLM   # git checkout v1.2.1
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVE = "tensorrt_llm/commands/serve.py"
LLM_ARGS = "tensorrt_llm/llmapi/llm_args.py"
SPEC_CLASSES = {"NGram": "NGramDecodingConfig", "Eagle": "EagleDecodingConfig", "Eagle3": "Eagle3DecodingConfig",
                "Draft_Target": "DraftTargetDecodingConfig", "MTP": "MTPDecodingConfig", "Medusa": "MedusaDecodingConfig"}
BACKENDS = ["pytorch", "tensorrt", "_autodeploy"]
# Beyond supports_backend(): TorchLlmArgs turns Eagle into Eagle3 (warning), TrtLlmArgs refuses Eagle3
# (both validate_speculative_config in llm_args.py).
BACKEND_OVERRIDES = {"Eagle": ["tensorrt"], "Eagle3": ["pytorch"]}
_TYPES = {"int": "int", "float": "float", "str": "str"}


def _option(call: ast.Call) -> dict | None:
    """One @click.option / @click.argument decorator as a snapshot option."""
    kind = getattr(call.func, "attr", "")
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    kw = {k.arg: k.value for k in call.keywords}
    flags = [n for n in names if n.startswith("-")]
    dest = next((n for n in names if not n.startswith("-")), None) or flags[0].lstrip("-").replace("-", "_")
    if kind == "argument":
        return {"flags": [], "dest": dest, "action": "_StoreAction", "type": "str", "choices": None,
                "nargs": None, "deprecated": False}
    if kind != "option":
        return None
    is_flag = isinstance(kw.get("is_flag"), ast.Constant) and kw["is_flag"].value is True
    multiple = isinstance(kw.get("multiple"), ast.Constant) and kw["multiple"].value is True
    type_node, choices, type_ = kw.get("type"), None, "str"
    if isinstance(type_node, ast.Name):
        type_ = _TYPES.get(type_node.id, "str")
    elif isinstance(type_node, ast.Call) and type_node.args:
        try:  # click.Choice([...]) / ChoiceWithAlias([...], {alias: name}): literal choices and aliases
            choices = sorted(ast.literal_eval(type_node.args[0]))
            if len(type_node.args) > 1:
                choices = sorted(set(choices) | set(ast.literal_eval(type_node.args[1])))
        except ValueError:
            choices = None  # computed at import time (e.g. parser registries): any string
    action = "_StoreTrueAction" if is_flag else "_AppendAction" if multiple else "_StoreAction"
    return {"flags": flags, "dest": dest, "action": action, "type": None if is_flag else type_,
            "choices": choices, "nargs": 0 if is_flag else None, "deprecated": False}


def serve_options(source: str) -> list[dict]:
    """The options of `def serve` (the @click.command('serve') function) in serve.py source."""
    tree = ast.parse(source)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "serve")
    opts = [_option(d) for d in fn.decorator_list if isinstance(d, ast.Call)]
    return sorted((o for o in opts if o), key=lambda o: (o["flags"][:1] or [""], o["dest"]))


def _classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def fields(classes: dict[str, ast.ClassDef], name: str) -> set[str]:
    """A pydantic model's field names (and validation aliases), inherited ones included."""
    cls = classes[name]
    out: set[str] = set()
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id in classes:
            out |= fields(classes, base.id)
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if stmt.target.id.startswith("_") or "ClassVar" in ast.unparse(stmt.annotation):
                continue
            out.add(stmt.target.id)
            text = ast.unparse(stmt.value) if stmt.value else ""
            if "AliasChoices(" in text:
                out |= set(ast.literal_eval(text.split("AliasChoices(", 1)[1].split(")", 1)[0] + ","))
    return out


def _supports(classes: dict[str, ast.ClassDef], name: str) -> list[str]:
    cls = classes[name]
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "supports_backend":
            scope: dict = {}
            exec(compile(ast.Module([stmt], []), "<supports_backend>", "exec"), scope)  # noqa: S102 - own checkout
            return [b for b in BACKENDS if scope["supports_backend"](None, b)]
    base = next((b.id for b in cls.bases if isinstance(b, ast.Name) and b.id in classes), None)
    return _supports(classes, base) if base else list(BACKENDS)


# Annotation names that are plain YAML scalars; other names the module does not define read as "any".
SCALARS = {"int": "int", "NonNegativeInt": "int", "PositiveInt": "int", "StrictInt": "int", "float": "float",
           "NonNegativeFloat": "float", "PositiveFloat": "float", "bool": "bool", "str": "str", "Path": "str"}
ENUM_BASES = {"Enum", "StrEnum", "IntEnum"}


def _aliases(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level type aliases (Nvfp4Backend = Literal[...], SpeculativeConfig: TypeAlias = ...)."""
    out: dict[str, ast.expr] = {}
    for n in tree.body:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            out[n.targets[0].id] = n.value
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value is not None:
            out[n.target.id] = n.value
    return out


def _enum_values(cls: ast.ClassDef) -> list | None:
    if not {getattr(b, "id", "") for b in cls.bases} & ENUM_BASES:
        return None
    return [s.value.value for s in cls.body if isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant)]


def _any_of(members: list) -> object:
    """A union as a spec: 'any' when a member is, or when it picks between models (discriminated unions
    have their own check)."""
    members = [m for i, m in enumerate(members) if m not in members[:i]]
    if "any" in members or sum(isinstance(m, dict) and "model" in m for m in members) > 1:
        return "any"
    return members[0] if len(members) == 1 else {"anyOf": members}


def type_spec(node: ast.expr, classes: dict[str, ast.ClassDef], aliases: dict[str, ast.expr]) -> object:
    """A field annotation as a JSON type spec: int, float, bool, str, null, any, {enum}, {list}, {dict},
    {model}, {anyOf}."""
    spec = lambda n: type_spec(n, classes, aliases)  # noqa: E731
    if isinstance(node, ast.Constant) and node.value is None:
        return "null"
    if isinstance(node, ast.Name):
        if node.id in SCALARS:
            return SCALARS[node.id]
        if node.id in aliases:
            return spec(aliases[node.id])
        cls = classes.get(node.id)
        values = _enum_values(cls) if cls else None
        return {"enum": values} if values is not None else {"model": node.id} if cls else "any"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _any_of([spec(node.left), spec(node.right)])
    if not isinstance(node, ast.Subscript):
        return "any"
    base = getattr(node.value, "id", getattr(node.value, "attr", ""))
    args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
    if base == "Optional":
        return _any_of([spec(args[0]), "null"])
    if base == "Union":
        return _any_of([spec(a) for a in args])
    if base == "Literal":
        return {"enum": [ast.literal_eval(a) for a in args]}
    if base == "Annotated":
        return spec(args[0])
    if base in ("List", "list", "Set", "set"):
        return {"list": spec(args[0])}
    if base in ("Dict", "dict"):
        return {"dict": spec(args[-1])}
    return "any"


def _coerced(classes: dict[str, ast.ClassDef], name: str) -> set[str]:
    """Fields with a mode='before' validator (they take other forms than their annotation): not type-checked."""
    cls, out = classes[name], set()
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id in classes:
            out |= _coerced(classes, base.id)
    for fn in (s for s in cls.body if isinstance(s, ast.FunctionDef)):
        for d in fn.decorator_list:
            if isinstance(d, ast.Call) and getattr(d.func, "id", "") == "field_validator" and \
                    any(k.arg == "mode" and getattr(k.value, "value", "") == "before" for k in d.keywords):
                out |= {a.value for a in d.args if isinstance(a, ast.Constant)}
    return out


def _annotations(classes: dict[str, ast.ClassDef], name: str) -> dict[str, ast.expr]:
    out: dict[str, ast.expr] = {}
    for base in classes[name].bases:
        if isinstance(base, ast.Name) and base.id in classes:
            out |= _annotations(classes, base.id)
    for stmt in classes[name].body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and \
                not stmt.target.id.startswith("_") and "ClassVar" not in ast.unparse(stmt.annotation):
            out[stmt.target.id] = stmt.annotation
    return out


def field_types(tree: ast.Module, roots: list[str]) -> dict[str, dict[str, object]]:
    """Class -> field -> type spec for the roots and every model class their fields reach."""
    classes, aliases = _classes(tree), _aliases(tree)
    out: dict[str, dict[str, object]] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in out or name not in classes:
            continue
        coerced = _coerced(classes, name)
        out[name] = {f: "any" if f in coerced else type_spec(a, classes, aliases)
                     for f, a in sorted(_annotations(classes, name).items())}
        todo += [m for s in out[name].values() for m in re.findall(r"'model': '(\w+)'", repr(s))]
    return out


def yaml_schema(source: str) -> dict:
    """The --config YAML keys: LLM args per backend, KvCacheConfig, speculative configs by decoding_type."""
    classes = _classes(ast.parse(source))
    spec = {kind: {"keys": sorted(fields(classes, cls)), "backends": sorted(BACKEND_OVERRIDES.get(kind) or _supports(classes, cls))}
            for kind, cls in SPEC_CLASSES.items() if cls in classes}
    return {"TorchLlmArgs": sorted(fields(classes, "TorchLlmArgs")),
            "TrtLlmArgs": sorted(fields(classes, "TrtLlmArgs")),
            "KvCacheConfig": sorted(fields(classes, "KvCacheConfig")),
            "speculative_config": spec,
            "types": field_types(ast.parse(source), ["TorchLlmArgs", "TrtLlmArgs"])}


def from_source(checkout: Path, version: str) -> dict:
    """The snapshot from a source checkout (commit recorded when it is a git checkout)."""
    try:
        commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        commit = None
    sources = [{"repo": "NVIDIA/TensorRT-LLM", "path": p, "commit": commit} for p in (SERVE, LLM_ARGS)]
    schema = yaml_schema((checkout / LLM_ARGS).read_text())
    return {"engine": "tensorrt-llm", "version": version, "generator": "scripts/snapshot_trtllm.py --source",
            "source": f"NVIDIA/TensorRT-LLM source checkout {commit or checkout}", "sources": sources,
            "backends": BACKENDS if "TrtLlmArgs" in _classes(ast.parse((checkout / LLM_ARGS).read_text()))
            else ["pytorch", "_autodeploy"],
            "options": serve_options((checkout / SERVE).read_text()), "yaml": schema}


def from_wheel(version: str) -> dict:
    """The snapshot from the installed tensorrt_llm package: read the same two files it ships."""
    import tensorrt_llm  # noqa: F401 - only on a machine with the wheel

    pkg = Path(tensorrt_llm.__file__).resolve().parent.parent
    snap = from_source(pkg, tensorrt_llm.__version__)
    snap["source"] = f"tensorrt_llm {tensorrt_llm.__version__} wheel"
    snap["generator"] = "scripts/snapshot_trtllm.py --wheel"
    return snap


def main() -> None:
    """Write the snapshot for one release."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", required=True)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--source", type=Path, help="a TensorRT-LLM checkout at the release tag")
    src.add_argument("--wheel", action="store_true", help="introspect the installed tensorrt_llm")
    args = ap.parse_args()
    snap = from_wheel(args.version) if args.wheel else from_source(args.source, args.version)
    out = ROOT / "infra" / "engines" / "snapshots" / f"trtllm-{args.version}.json"
    out.write_text(json.dumps(snap, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out.relative_to(ROOT)} ({len(snap['options'])} options)")


if __name__ == "__main__":
    main()
