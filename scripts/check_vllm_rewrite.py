"""Compare infra.engines.options.flexible_args with vLLM's own FlexibleArgumentParser argv rewriting.

Loads vllm/utils/argparse_utils.py straight from a vLLM wheel (its logger stubbed, nothing else of vLLM
imported), lets it rewrite each argv, and stops it just before argparse: the list it would parse must equal
ours, and where vLLM fails (e.g. a dot key with no value) ours must refuse too.

    python scripts/check_vllm_rewrite.py /tmp/vllm-snapshot/dl/vllm-0.33.0-*.whl
"""
from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import tempfile
import types
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = [
    ["--max_log_len", "100"], ["--enable_prefix_caching", "--max-model-len", "32k"],
    ["--compilation-config.cudagraph_mode", "FULL"], ["--speculative_config.method", "ngram"],
    ["--compilation_config.pass_config.fuse_norm_quant=true", "--compilation-config.mode", "3"],
    ["--compilation-config.mode", "3", "-cc.max_cudagraph_capture_size", "64"],
    ["--limit-mm-per-prompt.image=0", "--limit-mm-per-prompt.video", "1"],
    ["--compilation-config.custom_ops+", "none,+rms_norm", "--compilation-config.custom_ops+", "-silu"],
    ["-O3"], ["-O", "2"], ["-O=1"], ["-Odecode"], ["-O", "x"],
    ["--kv-transfer-config.kv_connector_extra_config.size", "80g"], ["--some_thing=a_b.c"],
    ["--a.b_c.d_e", "1.5"], ["--x.y", "[1,2]"], ["--x.y", "not json"],
    ["--x.a", "auto", "--x.b", "0.5K", "--x.c", "1.0001k", "--x.d", "-5", "--x.e", "2K"], ["--x.y"],
]


def load_vllm_argparse(wheel: Path):
    """vLLM's argparse_utils module from the wheel, with vllm.logger stubbed (and `regex` as `re` if absent)."""
    tmp = Path(tempfile.mkdtemp()) / "argparse_utils.py"
    with zipfile.ZipFile(wheel) as z:
        tmp.write_bytes(z.read("vllm/utils/argparse_utils.py"))
    quiet = types.SimpleNamespace(warning=lambda *a, **k: None, warning_once=lambda *a, **k: None)
    logger = types.ModuleType("vllm.logger")
    logger.init_logger = lambda name: quiet
    sys.modules.setdefault("vllm", types.ModuleType("vllm"))
    sys.modules["vllm.logger"] = logger
    if importlib.util.find_spec("regex") is None:
        sys.modules["regex"] = re  # the patterns argparse_utils uses are plain `re` syntax
    spec = importlib.util.spec_from_file_location("vllm_argparse_utils", tmp)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def vllm_rewrite(module, argv: list[str]) -> list[str] | str:
    """What vLLM's parser hands to argparse for `vllm serve m ARGV`, or 'refused' when it fails before."""
    seen: list[list[str]] = []
    real = argparse.ArgumentParser.parse_args
    argparse.ArgumentParser.parse_args = lambda self, args=None, namespace=None: seen.append(list(args))
    try:
        module.FlexibleArgumentParser(prog="vllm").parse_args(["serve", "m", *argv])
    except Exception:  # noqa: BLE001 - vLLM fails to start on it
        return "refused"
    finally:
        argparse.ArgumentParser.parse_args = real
    return seen[0][1:]


def main() -> None:
    """Print one line per case and exit 1 on any difference."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wheel", type=Path)
    module = load_vllm_argparse(ap.parse_args().wheel)
    sys.path.insert(0, str(ROOT))
    from infra.engines.options import OptionError, flexible_args

    differ = 0
    for argv in CASES:
        try:
            ours: list[str] | str = flexible_args(["m", *argv])
        except OptionError:
            ours = "refused"
        theirs = vllm_rewrite(module, argv)
        differ += ours != theirs
        print("same" if ours == theirs else f"DIFF vllm={theirs} inferry={ours}", argv)
    print(f"{len(CASES) - differ}/{len(CASES)} argv rewritten as vLLM does")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
