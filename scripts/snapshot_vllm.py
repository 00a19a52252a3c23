"""Regenerate infra/engines/snapshots/vllm-VERSION.json from vLLM's own `vllm serve` argument parser.

Builds a throwaway venv under /tmp (CPU torch, the vLLM wheel without its CUDA dependencies, its light
imports), imports `vllm.entrypoints.common.cli_args.make_arg_parser` there and dumps every option:
flags, kind, value type (found by probing vLLM's own type function), choices, nargs.
Rerunnable: the venv and the wheel are reused when present.

    python scripts/snapshot_vllm.py [--version 0.33.0] [--workdir /tmp/vllm-snapshot]
    python scripts/snapshot_vllm.py --check   # every bundled stack's rendered argv through the REAL parser
    python scripts/snapshot_vllm.py --registries-from-wheel vllm-0.33.0-...whl   # parser names only, no venv
    python scripts/snapshot_vllm.py --venv-only --workdir DIR   # build (or reuse) the venv, print its python
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TORCH = "torch==2.14.0"  # vLLM 0.33.0's Requires-Dist; used on the CPU only (the parser and start-up checks)
# Requirements never installed: GPU kernels and CUDA wheels (GBs) that the parser does not import.
HEAVY = re.compile(r"^(torch|torchaudio|torchvision|torchcodec|flashinfer|nvidia|tilelang|quack|tokenspeed|humming"
                   r"|pynvvideocodec|fastsafetensors|instanttensor|triton|xformers|cupy|ray|zentorch|nvtx)", re.I)
# Light packages whose declared deps would drag torch/CUDA back in: installed with --no-deps.
NO_DEPS = {"xgrammar", "llguidance", "apache-tvm-ffi", "compressed-tensors", "depyf", "lm-format-enforcer",
           "outlines_core", "mistral_common"}
# Probe values: which of them vLLM's type function accepts tells the value type.
PROBES = ["7", "-1", "0.5", "32k", "true", "abc", '{"a": 1}', "[1, 2]", "None"]


def sh(*cmd: str, env: dict | None = None) -> None:
    """Run a command, echoing it; fail loudly."""
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, env=env)


def requirements(wheel: Path) -> list[str]:
    """The wheel's unconditional runtime requirements, minus the heavy ones."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    reqs = []
    for line in lines:
        if not line.startswith("Requires-Dist: "):
            continue
        req, _, marker = line[len("Requires-Dist: "):].partition(";")
        if "extra ==" in marker or ("python_version > \"3.11\"" in marker and sys.version_info < (3, 12)):
            continue
        if "s390x\"" in marker and "!=" not in marker and "==" in marker and "x86_64" not in marker:
            continue
        name = re.split(r"[<>=!\[ ]", req.strip(), maxsplit=1)[0]
        if not HEAVY.match(name):
            reqs.append(req.strip())
    return reqs


def build_venv(version: str, work: Path) -> Path:
    """A venv with vLLM importable on the CPU; reused when already built."""
    py = work / "venv" / "bin" / "python"
    stamp = work / f"venv/.vllm-{version}-{TORCH}"
    if stamp.exists():
        return py
    work.mkdir(parents=True, exist_ok=True)
    if not py.exists():
        sh(sys.executable, "-m", "venv", str(work / "venv"))
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    wheels = sorted((work / "dl").glob(f"vllm-{version}-*.whl"))
    if not wheels:
        sh(str(py), "-m", "pip", "download", "-q", f"vllm=={version}", "--no-deps", "-d", str(work / "dl"))
        wheels = sorted((work / "dl").glob(f"vllm-{version}-*.whl"))
    sh(*pip, TORCH)
    sh(*pip, "--no-deps", str(wheels[-1]))
    reqs = requirements(wheels[-1])
    no_deps = [r for r in reqs if re.split(r"[<>=!\[ ]", r, maxsplit=1)[0].replace("_", "-").lower()
               in {n.replace("_", "-").lower() for n in NO_DEPS}]
    constraints = work / "constraints.txt"
    constraints.write_text(TORCH + "\n")
    sh(*pip, "-c", str(constraints), *[r for r in reqs if r not in no_deps])
    sh(*pip, "--no-deps", *no_deps)
    stamp.touch()
    return py


def _probe(type_fn) -> list[str]:
    accepted = []
    for value in PROBES:
        try:
            type_fn(value)
            accepted.append(value)
        except Exception:  # noqa: BLE001 - any rejection counts as "not accepted"
            pass
    return accepted


def classify(type_fn) -> str:
    """The value type of an option, from what vLLM's own type function accepts."""
    if type_fn is None:
        return "str"
    ok = set(_probe(type_fn))
    if '{"a": 1}' in ok and "abc" not in ok:
        return "json"
    if "abc" in ok:
        return "str"
    if "true" in ok:
        return "bool"
    if "32k" in ok:
        return "human_int"
    if "0.5" in ok:
        return "float"
    if "7" in ok:
        return "int"
    return "str"


def value_sets() -> dict:
    """Values vLLM checks after parsing (the parser itself takes any string for these flags)."""
    import dataclasses
    import typing

    from vllm.config import SpeculativeConfig, cache, speculative
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
    from vllm.model_executor.model_loader import _LOAD_FORMAT_TO_MODEL_LOADER
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    return {
        # Names resolved at start-up (validate_api_server_args in entrypoints/common/cli_args.py).
        "tool_call_parser": sorted(ToolParserManager.list_registered()),
        "reasoning_parser": sorted(ReasoningParserManager.list_registered()),
        "quantization": sorted(QUANTIZATION_METHODS),
        "kv_cache_dtype": sorted(typing.get_args(cache.CacheDType)),
        "load_format": sorted(_LOAD_FORMAT_TO_MODEL_LOADER),
        "speculative_config.method": sorted(typing.get_args(speculative.SpeculativeMethod)),
        "speculative_config.keys": sorted(f.name for f in dataclasses.fields(SpeculativeConfig) if f.init),
    }


# The lazy registries, by module and dict name (vllm/tool_parsers/__init__.py, vllm/reasoning/__init__.py).
REGISTRIES = {"tool_call_parser": ("vllm/tool_parsers/__init__.py", "_TOOL_PARSERS_TO_REGISTER"),
              "reasoning_parser": ("vllm/reasoning/__init__.py", "_REASONING_PARSERS_TO_REGISTER")}


def registries_from_wheel(wheel: Path) -> dict:
    """The parser registries read from the wheel's source with `ast` (nothing imported): the names
    ToolParserManager / ReasoningParserManager.list_registered() return, as no module registers eagerly."""
    import ast

    found = {}
    with zipfile.ZipFile(wheel) as z:
        for key, (path, var) in REGISTRIES.items():
            tree = ast.parse(z.read(path).decode())
            node = next(n for n in tree.body if isinstance(n, ast.Assign)
                        and any(getattr(t, "id", None) == var for t in n.targets))
            found[key] = sorted(ast.literal_eval(node.value))
    return found


def dataclass_keys_from_wheel(wheel: Path, dests: list[str]) -> dict:
    """For each config-group option (parse_dataclass: pydantic, extra keys forbidden), the keys its JSON may
    set: the init fields of the class EngineArgs annotates it with, read from the wheel with `ast`."""
    import ast

    with zipfile.ZipFile(wheel) as z:
        trees = [ast.parse(z.read(n).decode()) for n in z.namelist() if n.startswith("vllm/config/") and n.endswith(".py")]
        engine_args = ast.parse(z.read("vllm/engine/arg_utils.py").decode())
    classes = {c.name: c for t in trees for c in t.body if isinstance(c, ast.ClassDef)}
    ea = next(c for c in engine_args.body if isinstance(c, ast.ClassDef) and c.name == "EngineArgs")
    annotations = {st.target.id: st.annotation for st in ea.body if isinstance(st, ast.AnnAssign)}
    out = {}
    for dest in dests:
        name = next(n.id for n in ast.walk(annotations[dest]) if isinstance(n, ast.Name) and n.id in classes)
        out[f"{dest}.keys"] = sorted(_init_fields(classes, name))
    return out


def _init_fields(classes: dict, name: str) -> set[str]:
    import ast

    cls, names = classes[name], set()
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id in classes:
            names |= _init_fields(classes, base.id)
    for st in cls.body:
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
            text = ast.unparse(st.annotation) + " = " + (ast.unparse(st.value) if st.value else "")
            if "ClassVar" not in text and "init=False" not in text:
                names.add(st.target.id)
    return names


def dump(version: str) -> dict:
    """Run inside the vLLM venv: every `vllm serve` option as plain data."""
    import dataclasses

    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    import vllm
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    root = FlexibleArgumentParser(prog="vllm")
    serve = make_arg_parser(root.add_subparsers().add_parser("serve"))
    # Every string the parser answers to, hidden aliases included (e.g. --no-enable-x).
    strings: dict[int, list[str]] = {}
    for text, action in serve._option_string_actions.items():
        strings.setdefault(id(action), []).append(text)
    options = []
    for a in serve._actions:
        if isinstance(a, argparse._HelpAction):
            continue
        kind = type(a).__name__
        options.append({
            "flags": list(a.option_strings) + sorted(set(strings.get(id(a), [])) - set(a.option_strings)),
            "dest": a.dest,
            "action": kind,
            "type": classify(a.type) if kind in ("_StoreAction", "_AppendAction", "_ExtendAction") else None,
            "type_name": getattr(a.type, "__name__", repr(a.type)) if a.type else None,
            "choices": sorted(map(str, a.choices)) if a.choices else None,
            "nargs": a.nargs if a.nargs is None or isinstance(a.nargs, (int, str)) else str(a.nargs),
            "deprecated": bool(getattr(a, "deprecated", False)),
        })
    values = value_sets()
    for a in serve._actions:  # parse_dataclass(val, cls=...): the config class whose fields the JSON may set
        if getattr(a.type, "__name__", "") == "parse_dataclass":
            cls = a.type.__defaults__[0]
            values[f"{a.dest}.keys"] = sorted(f.name for f in dataclasses.fields(cls) if f.init)
    return {"engine": "vllm", "version": vllm.__version__, "source": f"vllm=={version} wheel (PyPI), "
            "vllm.entrypoints.common.cli_args.make_arg_parser", "generator": "scripts/snapshot_vllm.py",
            "values": values,
            "options": sorted(options, key=lambda o: (o["flags"][:1] or [""], o["dest"]))}


def verify(argvs: list[list[str]]) -> list[str]:
    """Run inside the vLLM venv: the argvs the real `vllm serve` parser refuses, with its message."""
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    real = make_arg_parser(FlexibleArgumentParser(prog="vllm").add_subparsers().add_parser("serve"))
    refused = []
    for argv in argvs:
        try:
            real.parse_args(argv)
        except SystemExit:
            refused.append(" ".join(argv))
    return refused


def rendered_argvs() -> list[list[str]]:
    """Every bundled stack's rendered `vllm serve` arguments (runs with the project importable)."""
    sys.path.insert(0, str(ROOT))
    from infra.engines import service_spec
    from infra.checks import register_checks
    from infra.stack.stackfile import load_stack

    register_checks()
    specs = [service_spec(load_stack(str(p)).deployment) for p in sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))]
    return [list(s.args) for s in specs if s.engine == "vllm"]


def add_registries(version: str, wheel: Path) -> None:
    """Add the parser registries to the committed snapshot (when the full venv cannot be built)."""
    target = ROOT / "infra" / "engines" / "snapshots" / f"vllm-{version}.json"
    snap = json.loads(target.read_text())
    snap["values"].update(registries_from_wheel(wheel))
    snap["values_sources"] = {k: f"{wheel.name}: {path} {var} (ast)" for k, (path, var) in REGISTRIES.items()}
    dests = [o["dest"] for o in snap["options"] if o.get("type_name") == "parse_dataclass"]
    keys = dataclass_keys_from_wheel(wheel, dests)
    snap["values"].update(keys)
    snap["values_sources"].update({k: f"{wheel.name}: the init fields of EngineArgs.{k[:-5]}'s config class "
                                   "(vllm/engine/arg_utils.py, vllm/config/*.py; ast)" for k in keys})
    target.write_text(json.dumps(snap, indent=1, sort_keys=True) + "\n")
    print(f"added {len(snap['values_sources'])} name sets to {target.relative_to(ROOT)}")


def main() -> None:
    """Build the venv (once), dump the parser there, write the snapshot (or --check rendered argvs)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default="0.33.0")
    ap.add_argument("--workdir", default="/tmp/vllm-snapshot", type=Path)
    ap.add_argument("--check", action="store_true", help="check bundled stacks' argv with the real parser")
    ap.add_argument("--registries-from-wheel", type=Path, metavar="WHEEL",
                    help="only add the post-parse name sets (parser registries, config-group keys) to the "
                    "committed snapshot, read from a vLLM wheel")
    ap.add_argument("--venv-only", action="store_true", help="build (or reuse) the venv and print its python")
    ap.add_argument("--dump", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--verify", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.dump:
        json.dump(dump(args.version), sys.stdout, indent=1, sort_keys=True)
        return
    if args.verify:
        json.dump(verify(json.load(sys.stdin)), sys.stdout)
        return
    if args.registries_from_wheel:
        add_registries(args.version, args.registries_from_wheel)
        return
    py = build_venv(args.version, args.workdir)
    if args.venv_only:
        print(py)
        return
    env = dict(os.environ, VLLM_TARGET_DEVICE="cpu", PYTHONPATH="")
    if args.check:
        argvs = rendered_argvs()
        refused = json.loads(subprocess.run([str(py), __file__, "--verify"], input=json.dumps(argvs), check=True,
                                            capture_output=True, text=True, env=env).stdout)
        print(f"real vllm {args.version} parser: {len(argvs) - len(refused)}/{len(argvs)} rendered argv accepted")
        for line in refused:
            print("  refused:", line)
        sys.exit(1 if refused else 0)
    out = subprocess.run([str(py), __file__, "--dump", "--version", args.version], check=True,
                         capture_output=True, text=True, env=env).stdout
    target = ROOT / "infra" / "engines" / "snapshots" / f"vllm-{args.version}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(out + "\n")
    print(f"wrote {target.relative_to(ROOT)} ({len(json.loads(out)['options'])} options)")


if __name__ == "__main__":
    main()
