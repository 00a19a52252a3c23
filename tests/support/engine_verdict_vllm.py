"""Run inside the engine tier's vLLM venv (`scripts/engine_tier.sh vllm`): vLLM's own `vllm serve` start-up, up to
where it needs the model and a GPU, on each command line read from stdin (a JSON list of the argv after
`vllm serve`); its verdict and parsed values as a JSON list on stdout.

What runs is what `vllm` (vllm/entrypoints/cli/main.py) does: the CLI parser with the `serve` subcommand, the
subcommand's validate (validate_parsed_serve_args), AsyncEngineArgs.from_cli_args (its dataclass checks), the
structured-outputs config it builds before the engine, and the API server's validate_api_server_args (parser
registries). Each verdict: {"ok": true, "values": {dest: value}} or {"ok": false, "code": exit status, "error":
the last line vLLM printed or raised}. Standard library and vllm only; nothing of inferry is imported here.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")


def _serve():
    """vLLM's own CLI parser with its `serve` subcommand, as main() builds it, and that subcommand."""
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    cmd = ServeSubcommand()
    cmd.subparser_init(subparsers).set_defaults(dispatch_function=cmd.cmd)
    return parser, cmd


def verdict(argv: list[str]) -> dict:
    """vLLM's answer for one `vllm serve` command line, before it loads the model."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.common.cli_args import validate_api_server_args

    parser, cmd = _serve()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(["serve", *argv])
    except SystemExit as e:  # argparse's parser.error: usage and message on stderr, exit 2
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        return {"ok": False, "code": e.code, "error": lines[-1] if lines else str(e)}
    try:
        cmd.validate(args)
        if getattr(args, "model_tag", None) is not None:
            args.model = args.model_tag  # ServeSubcommand.cmd
        engine_args = AsyncEngineArgs.from_cli_args(args)
        engine_args.create_structured_outputs_config()
        lora_config(engine_args)
        validate_api_server_args(args)
    except Exception as e:  # noqa: BLE001 - raised before the engine starts: a traceback, exit 1
        return {"ok": False, "code": 1, "error": f"{type(e).__name__}: {e}"}
    values = {k: v for k, v in vars(args).items() if k not in ("dispatch_function", "subparser")}
    return {"ok": True, "values": json.loads(json.dumps(values, default=repr))}


def lora_config(e) -> None:
    """vLLM's LoRAConfig as EngineArgs.create_engine_config builds it (vllm/engine/arg_utils.py), when LoRA is
    on: its own checks (max_cpu_loras against max_loras, ...) run without the model."""
    from vllm.config.lora import LoRAConfig

    if not e.enable_lora:
        return
    LoRAConfig(max_lora_rank=e.max_lora_rank, max_loras=e.max_loras, default_mm_loras=e.default_mm_loras,
               fully_sharded_loras=e.fully_sharded_loras, lora_dtype=e.lora_dtype,
               target_modules=e.lora_target_modules, enable_tower_connector_lora=e.enable_tower_connector_lora,
               specialize_active_lora=e.specialize_active_lora,
               enable_mixed_moe_lora_format=e.enable_mixed_moe_lora_format,
               enable_moe_shared_loras=e.enable_moe_shared_loras, max_lora_cls_labels=e.max_lora_cls_labels,
               max_cpu_loras=e.max_cpu_loras if e.max_cpu_loras and e.max_cpu_loras > 0 else None)


def option_table() -> list[dict]:
    """Every option of the real `vllm serve` parser: dest, every string it answers to, choices."""
    parser, _ = _serve()
    serve = next(a for a in parser._actions if a.dest == "subparser").choices["serve"]
    strings: dict[int, set[str]] = {}
    for text, action in serve._option_string_actions.items():
        strings.setdefault(id(action), set()).add(text)
    return [{"dest": a.dest, "flags": sorted(strings.get(id(a), set()) | set(a.option_strings)),
             "choices": sorted(map(str, a.choices)) if a.choices else None}
            for a in serve._actions if a.option_strings and a.dest != "help"]


def value_sets() -> dict:
    """The names vLLM checks after parsing (quantization methods, KV-cache dtypes, ...), from vLLM itself by
    scripts/snapshot_vllm.py's own reader (the one that writes them into the snapshot)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "snapshot_vllm.py"
    spec = importlib.util.spec_from_file_location("snapshot_vllm", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.value_sets()


def main() -> None:
    """Verdicts for every command line on stdin; with --options, the parser's option table instead; with
    --values, the post-parse name sets."""
    if sys.argv[1:] == ["--options"]:
        print(json.dumps(option_table()))
    elif sys.argv[1:] == ["--values"]:
        print(json.dumps(value_sets()))
    else:
        print(json.dumps([verdict(argv) for argv in json.load(sys.stdin)]))


if __name__ == "__main__":
    main()
