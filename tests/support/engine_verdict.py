"""Run inside the engine tier's venv (scripts/engine_tier.sh): SGLang's own prepare_server_args on each command
line read from stdin (a JSON list of argv lists), its verdict and parsed values as a JSON list on stdout.

Each verdict: {"ok": true, "values": {dest: value}} or {"ok": false, "error": the last line SGLang printed or
raised}. Standard library and sglang only; nothing of inferry is imported here.
"""
from __future__ import annotations

import contextlib
import io
import json
import sys


def verdict(argv: list[str]) -> dict:
    """SGLang's answer for one command line: what launch_server does before it resolves for the GPU."""
    from sglang.srt.server_args import prepare_server_args, record_fields

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = prepare_server_args(argv)
    except SystemExit as e:  # argparse's parser.error: usage and message on stderr, exit 2
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        return {"ok": False, "code": e.code, "error": lines[-1] if lines else str(e)}
    except Exception as e:  # noqa: BLE001 - the --config merger's ValueError and kin: a traceback, exit 1
        return {"ok": False, "code": 1, "error": f"{type(e).__name__}: {e}"}
    values = {f.name: getattr(args, f.name) for f in record_fields(type(args)) if hasattr(args, f.name)}
    return {"ok": True, "values": json.loads(json.dumps(values, default=repr))}


def option_table() -> list[dict]:
    """Every option of the real `sglang serve` parser as prepare_server_args builds it."""
    import argparse

    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return [{"dest": a.dest, "flags": sorted(a.option_strings), "nargs": a.nargs, "action": type(a).__name__,
             "choices": sorted(map(str, a.choices)) if a.choices is not None else None}
            for a in parser._actions if a.option_strings and a.dest != "help"]


def main() -> None:
    """Verdicts for every command line on stdin; with --options, the parser's option table instead."""
    if sys.argv[1:] == ["--options"]:
        print(json.dumps(option_table()))
    else:
        print(json.dumps([verdict(argv) for argv in json.load(sys.stdin)]))


if __name__ == "__main__":
    main()
