"""Write infra/engines/snapshots/sglang-VERSION.json from the SGLang wheel's source, read with `ast` (no torch,
nothing imported): every `python -m sglang.launch_server` option as `ServerArgs.add_cli_args` registers it.

In the 0.5 line `ServerArgs` is assembled from namespace classes (sglang/srt/arg_groups/fields/*.py, listed in
server_args.py's `_INPUT_NAMESPACES`) whose fields are `A[T, "help"]` or `A[T, Arg(...)]`; `add_cli_args` turns
each into an argparse option (arg_groups/arg_utils.py, add_cli_args_from_dataclass) and then registers a few by
hand (`parser.add_argument(...)`: dynamic choices, deprecated flags, --config). This script follows both.

    python scripts/snapshot_sglang.py [--wheel sglang-0.5.23-....whl] [--version 0.5.23]
(without --wheel it runs `pip download --no-deps sglang==VERSION` into /tmp/sglang-snapshot)
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRT = "sglang/srt/"
# argparse's own type for each annotation (arg_utils._infer_type_func), and the value type options.py checks.
SCALARS = {"int": "int", "float": "float", "str": "str", "bool": "bool"}
# type_parser= functions -> the value type options.py checks (arg_utils / utils/common.py).
PARSERS = {"human_readable_int": "si_iec_int", "json.loads": "json", "json_list_type": "json",
           "nullable_str": "str"}
# Choices `add_cli_args` computes when it runs (server_args.py): where each list is read from instead.
DYNAMIC = {
    "sampling_backend_choices": ("arg_groups/choices.py", "BUILT_IN_SAMPLING_BACKENDS", []),
    "reasoning_parser_choices": ("parser/reasoning_parser_names.py", "REASONING_PARSER_NAMES", ["auto"]),
    "tool_call_parser_choices": ("function_call/parser_names.py", "TOOL_CALL_PARSER_NAMES", ["auto"]),
}


class Wheel:
    """The wheel's Python sources, parsed on demand."""

    def __init__(self, path: Path):
        self.zip, self.trees = zipfile.ZipFile(path), {}

    def tree(self, rel: str) -> ast.Module:
        """The parsed module at sglang/srt/<rel>."""
        if rel not in self.trees:
            self.trees[rel] = ast.parse(self.zip.read(SRT + rel).decode())
        return self.trees[rel]

    def source(self, module: str) -> str | None:
        """The sglang/srt/<rel> path of an imported module, or None when it is not in the wheel's srt/."""
        rel = module.removeprefix("sglang.srt.").replace(".", "/") + ".py"
        return rel if module.startswith("sglang.srt.") and SRT + rel in self.zip.namelist() else None

    def value(self, rel: str, node: ast.AST, scope: list | None = None):
        """A choices expression's value: literals, `+`, set()/frozenset(), names and Class.ATTR, followed through
        `from ... import` to the module that defines them."""
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return [self.value(rel, e, scope) for e in node.elts]
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.value(rel, node.left, scope) + self.value(rel, node.right, scope)
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("set", "frozenset", "list", "sorted"):
            return sorted(self.value(rel, node.args[0], scope))
        if isinstance(node, ast.Name):
            return self.name(rel, node.id, scope)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            rel2, cls = self.where(rel, node.value.id)
            return self.name(rel2, node.attr, cls.body)
        raise ValueError(f"{rel}: cannot read {ast.unparse(node)}")

    def name(self, rel: str, name: str, scope: list | None = None):
        """A name's value in a class body (scope) or module."""
        for st in (scope or []) + self.tree(rel).body:
            target = st.targets[0] if isinstance(st, ast.Assign) else getattr(st, "target", None)
            if isinstance(target, ast.Name) and target.id == name and st.value is not None:
                return self.value(rel, st.value, scope)
        rel2, _ = self.where(rel, name)
        return self.name(rel2, name)

    def where(self, rel: str, name: str) -> tuple[str, ast.AST | None]:
        """(module, class node or None) where a name used in rel is defined."""
        for st in self.tree(rel).body:
            if isinstance(st, ast.ClassDef) and st.name == name:
                return rel, st
            if isinstance(st, ast.ImportFrom) and any((a.asname or a.name) == name for a in st.names):
                src = self.source(st.module or "")
                if src is None:
                    break
                return self.where(src, name) if src != rel else (src, None)
        return rel, None

    def constant(self, rel: str, name: str) -> list:
        """A module-level list or set of names, as a list (sets sorted)."""
        return list(self.name(rel, name))


def _namespaces(w: Wheel) -> list[tuple[str, str]]:
    """(module, class) of each namespace in `_INPUT_NAMESPACES` order (server_args.py)."""
    tree = w.tree("server_args.py")
    where = {a.asname or a.name: n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module
             and n.module.startswith("sglang.srt.arg_groups.fields") for a in n.names}
    listed = next(n.value for n in tree.body if isinstance(n, ast.Assign)
                  and getattr(n.targets[0], "id", "") == "_INPUT_NAMESPACES")
    return [(where[e.id].removeprefix("sglang.srt.").replace(".", "/") + ".py", e.id) for e in listed.elts]


def _choices(w: Wheel, rel: str, node: ast.AST | None):
    return None if node is None else [str(v) for v in w.value(rel, node)]


def _unwrap(t: ast.AST) -> tuple[ast.AST, bool]:
    """(the type without Optional, whether it was Optional)."""
    if isinstance(t, ast.Subscript) and ast.unparse(t.value) == "Optional":
        return t.slice, True
    if isinstance(t, ast.BinOp) and isinstance(t.op, ast.BitOr) and ast.unparse(t.right) == "None":
        return t.left, True
    return t, False


def _field_option(w: Wheel, rel: str, name: str, ann: ast.Subscript, default: ast.AST | None) -> dict | None:
    """One field's option as add_cli_args_from_dataclass registers it; None when it has no CLI."""
    if ast.unparse(ann.value) != "A":
        return None
    typ, *meta = ann.slice.elts
    arg = next((m for m in meta if isinstance(m, ast.Call) and ast.unparse(m.func) == "Arg"), None)
    if arg is None and not any(isinstance(m, ast.Constant) and isinstance(m.value, str) for m in meta):
        return None
    kw = {k.arg: k.value for k in (arg.keywords if arg else [])}
    if "no_cli" in kw and ast.literal_eval(kw["no_cli"]):
        return None
    cli = ast.literal_eval(kw["cli_name"]) if "cli_name" in kw else "--" + name.replace("_", "-")
    flags = [cli, *(ast.literal_eval(kw["aliases"]) if "aliases" in kw else [])]
    inner, optional = _unwrap(typ)
    opt = {"dest": name, "flags": flags, "action": "_StoreAction", "nargs": None, "choices": None,
           "type_name": None, "deprecated": False, "annotation": ast.unparse(typ), "namespace_file": rel,
           "line": ann.lineno, "default": _default(default), "required": default is None}
    if "action" in kw:
        action = ast.unparse(kw["action"]).rsplit(".", 1)[-1]
        opt.update(action=action, type=None, nargs=0 if action == "BooleanOptionalAction" else "*")
        if action == "BooleanOptionalAction":
            opt["flags"] += ["--no-" + f[2:] for f in flags]
        return opt
    parser = ast.unparse(kw["type_parser"]) if "type_parser" in kw else None
    base = ast.unparse(inner.slice if isinstance(inner, ast.Subscript) else inner)
    if isinstance(inner, ast.Subscript) and ast.unparse(inner.value) == "Literal":
        values = ast.literal_eval(inner.slice)
        values = list(values) if isinstance(values, tuple) else [values]
        opt.update(choices=[str(v) for v in (_choices(w, rel, kw.get("choices")) or values)],
                   type=PARSERS.get(parser, next(type(v).__name__ for v in values if v is not None)))
    elif isinstance(inner, ast.Subscript) and ast.unparse(inner.value) in ("List", "list") and parser is None:
        opt.update(nargs=ast.literal_eval(kw["nargs"]) if "nargs" in kw else "+", type=SCALARS.get(base, "str"),
                   choices=_choices(w, rel, kw.get("choices")))
    elif base == "bool" and parser is None:
        opt.update(action="_StoreTrueAction", type=None, nargs=0)
    else:
        opt.update(type=PARSERS.get(parser, SCALARS.get(base, "str")) if parser else SCALARS.get(base, "str"),
                   choices=_choices(w, rel, kw.get("choices")),
                   nargs=ast.literal_eval(kw["nargs"]) if "nargs" in kw else None)
    opt["type_name"] = parser or base
    opt["optional"] = optional
    return opt


def _default(node: ast.AST | None):
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)


def field_options(w: Wheel) -> list[dict]:
    """Every option the namespace classes declare."""
    found = []
    for rel, cls in _namespaces(w):
        node = next(n for n in w.tree(rel).body if isinstance(n, ast.ClassDef) and n.name == cls)
        for st in node.body:
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and isinstance(st.annotation, ast.Subscript):
                opt = _field_option(w, rel, st.target.id, st.annotation, st.value)
                if opt is not None:
                    found.append(opt)
    return found


def manual_options(w: Wheel) -> list[dict]:
    """The `parser.add_argument(...)` calls of ServerArgs.add_cli_args (server_args.py)."""
    cls = next(n for n in w.tree("server_args.py").body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs")
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "add_cli_args")
    found = []
    for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call) and ast.unparse(n.func) == "parser.add_argument"):
        flags = [ast.literal_eval(a) for a in call.args]
        kw = {k.arg: k.value for k in call.keywords}
        action = ast.unparse(kw["action"]) if "action" in kw else None
        dest = ast.literal_eval(kw["dest"]) if "dest" in kw else flags[0][2:].replace("-", "_")
        opt = {"dest": dest, "flags": flags, "action": "_StoreAction", "nargs": None, "type": "str",
               "type_name": "str", "choices": None, "deprecated": bool(action and "Deprecated" in action),
               "namespace_file": "server_args.py", "line": call.lineno, "default": None, "required": False}
        if opt["deprecated"] and "new_flag" in kw:  # what SGLang's warning says to write instead
            opt["new_flag"] = ast.literal_eval(kw["new_flag"])
        if action in ("DeprecatedStoreTrueAction", "'store_true'"):
            opt.update(action="_StoreTrueAction", type=None, type_name=None, nargs=0)
        elif "choices" in kw:
            opt["choices"] = _manual_choices(w, kw["choices"])
        found.append(opt)
    return found


def _manual_choices(w: Wheel, node: ast.AST) -> list[str]:
    text = ast.unparse(node)
    for var, (rel, const, extra) in DYNAMIC.items():
        if var in text:
            return extra + w.constant(rel, const)
    if "_real_kv_hash_modes" in text:  # [m.name.lower() for m in RealKvHashMode] (kernels/ops/kv_canary/consts.py)
        tree = ast.parse(w.zip.read("sglang/kernels/ops/kv_canary/consts.py").decode())
        enum = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RealKvHashMode")
        return [t.targets[0].id.lower() for t in enum.body if isinstance(t, ast.Assign)]
    return [str(v) for v in ast.literal_eval(node)]


def snapshot(wheel: Path, version: str) -> dict:
    """The snapshot as data."""
    w = Wheel(wheel)
    options = field_options(w) + manual_options(w)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    quant = w.constant("arg_groups/choices.py", "QUANTIZATION_CHOICES")
    return {
        "engine": "sglang", "version": version, "generator": "scripts/snapshot_sglang.py",
        "source": {"wheel": wheel.name, "sha256": digest, "read": "sglang/srt/server_args.py (ServerArgs."
                   "add_cli_args, _INPUT_NAMESPACES) and sglang/srt/arg_groups/fields/*.py, with ast"},
        # prepare_server_args: a plain argparse.ArgumentParser(prog="sglang serve"), so unique prefixes work.
        "parser": {"prog": "python3 -m sglang.launch_server", "allow_abbrev": True, "flexible": False},
        "values": {"quantization": quant},
        "values_sources": {"quantization": f"{wheel.name}: sglang/srt/arg_groups/choices.py QUANTIZATION_CHOICES"},
        "options": sorted(options, key=lambda o: (o["flags"][:1] or [""], o["dest"])),
    }


def main() -> None:
    """Download the wheel when not given, read it, write the snapshot."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default="0.5.23")
    ap.add_argument("--wheel", type=Path)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/sglang-snapshot"))
    args = ap.parse_args()
    wheel = args.wheel
    if wheel is None:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(args.workdir),
                        f"sglang=={args.version}"], check=True)
        wheel = sorted(args.workdir.glob(f"sglang-{args.version}-*.whl"))[-1]
    snap = snapshot(wheel, args.version)
    target = ROOT / "infra" / "engines" / "snapshots" / f"sglang-{args.version}.json"
    target.write_text(json.dumps(snap, indent=1, sort_keys=True) + "\n")
    print(f"wrote {target.relative_to(ROOT)} ({len(snap['options'])} options) from {wheel.name}")


if __name__ == "__main__":
    main()
