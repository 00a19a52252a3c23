"""Benchmark (not a test): mutants of the example stacks through `inferry validate`, counting what happens.

    PYTHONPATH=. .venv/bin/python bench/fuzz_stackfile.py --count 10000 --seed 1

Each mutant of stacks/Pulumi.eu-ssh.yaml, Pulumi.aws-k8s.yaml or Pulumi.staging.yaml (1-3 mutations: values
replaced by hostile ones, keys renamed, dropped or made non-strings, lines duplicated, tags, anchors and
aliases, alias bombs, deep nesting, huge numbers, stray bytes, truncation) runs through the function of the
`inferry validate` command (cli/stackcmds.py, with its error printer), in this process, under a timer. Prints
counts of accepted, clean errors, tracebacks (any exception that is not an InferryError) and runs over 2 s;
exit 1 unless both of the last two are 0. --keep DIR saves the mutants that failed, to replay with
`inferry validate FILE`.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import io
import random
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import typer  # noqa: E402
import yaml  # noqa: E402

from cli.stackcmds import validate  # noqa: E402  (the `inferry validate` command, error printing included)

# Named, not globbed: a stack file someone adds to stacks/ must not change what this measures.
EXAMPLES = [ROOT / "stacks" / name for name in ("Pulumi.eu-ssh.yaml", "Pulumi.aws-k8s.yaml", "Pulumi.staging.yaml")]
SLOW_S = 2.0
HARD_S = 30.0  # a run still going after this is stopped (and counted slow) so that one hang cannot stall the rest
BOMB = "bomb: &l0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"bomb{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9))
TAGS = ["!!python/object:os.system ", "!!python/name:os.system ", "!!binary ", "!!set ", "!!timestamp ", "!foo ",
        "!!int ", "!!float ", "!!bool ", "!!str ", "!!null ", "!!map ", "!!seq ", "!<tag:yaml.org,2002:int> "]
NOISE = list(":{}[]&*!|>'\"%@`#,-?\t\n \\") + ["\x00", "\x85", "\ufeff", "\u2028", "é", "😀", "\x1b[31m"]


class Hang(BaseException):
    """Raised by the timer: a BaseException, so that nothing under test catches it as an error."""


def hostile(rng: random.Random) -> object:
    """A value that a stack file should never hold where it is put."""
    depth = rng.randint(1, 40)
    nested: object = "x"
    for _ in range(depth):
        nested = [nested] if rng.random() < 0.5 else {"k": nested}
    return rng.choice([
        None, True, False, 0, -1, 1, 16, 2**31, 2**63, 10**rng.randint(20, 4000), -(10**400), 0.5, -0.0, 1e308,
        float("nan"), float("inf"), float("-inf"), "", " ", "8000", "0.9", "off", "yes", "on", "1", "true", "null",
        "x" * rng.choice([100, 10_000, 200_000]), "\x1b[31mred", "é€😀", "$(rm -rf /)", "a\nb", "1e3", "1:30",
        "2024-01-01", "s3://", "/", "v1:abc:def", [], [None], list(range(rng.randint(1, 3000))), {}, {1: "x"},
        {"": 1}, {None: 1}, {True: 1}, {"secure": "hunter2"}, {"secure": 1}, {"secure": "v1:YWJj:YWJj"},
        {"config": "apiKey"}, {"env": "X"}, {"config": "x", "env": "Y"}, {"kind": "ssh"}, {"kind": ["vllm"]}, nested,
    ])


def optional(rng: random.Random) -> tuple[str, str, object]:
    """(section, field, value): an optional field the examples leave out, filled with something odd but typed."""
    flag = rng.choice(["--max-model-len", "--max-num-batched-tokens", "--speculative-config", "--seed", "--x",
                       "--gpu-memory-utilization", "-tp", "--"])
    value = rng.choice(["9" * rng.choice([19, 400, 5000]), "[" * 3000, '{"method": 1}', "1e400", "nan", "", "-1",
                        "auto", "é", "1k", "1.5G"])
    big = rng.choice([1, 2**31 - 1, 10**rng.randint(1, 30)])
    return rng.choice([
        ("engine", "extra_args", rng.choice([[flag, value], [f"{flag}={value}"], [value], [flag] * 50])),
        ("engine", "*", {"kind": "tensorrt-llm", "max_model_len": 32768, "extra_options": {rng.choice([
            "kv_cache_config", "speculative_config", "max_batch_size", "x", "backend"]): rng.choice([
                hostile(rng), {"decoding_type": hostile(rng)}, {rng.choice(["enable_block_reuse", 1, ""]): 1}])}}),
        ("engine", "speculative", {"method": rng.choice(["ngram", "eagle", "mtp"]), "num_speculative_tokens": 3,
                                   "prompt_lookup_max": big, "prompt_lookup_min": rng.choice([1, big])}),
        ("engine", "version", rng.choice(["9" * 5000 + ".1.1", "1.3.0", "0.0.0", "1.2.1rc" + "9" * 5000])),
        ("engine", "max_num_seqs", big), ("engine", "max_num_batched_tokens", big),
        ("engine", "tensor_parallel_size", rng.randint(1, 64)), ("engine", "kind", "tensorrt-llm"),
        ("model", "architecture", {k: big for k in ("num_layers", "num_attention_heads", "num_kv_heads",
                                                     "head_dim", "hidden_size", "vocab_size", "max_context")}
         | {"num_params": rng.choice([1.0, 1e15, 8.03e9])}),
        ("model", "weights", rng.choice(["/" + "a/" * 5000, "s3://inferry-weights/" + "x" * 10000, "/m\u0000"])),
        ("provider", "tokens_per_second", rng.choice([1e-300, 1e9, 0.001])),
        ("provider", "price_per_gpu_hour", rng.choice([0, 1e-300, 1e6])), ("provider", "gpu", hostile(rng)),
        ("target", "labels", {"k" * rng.choice([1, 64, 5000]): "v"}), ("storage", "tags", {"": "x" * 10000}),
        ("target", "autoscaling", {"min_replicas": 0, "max_replicas": 1000, "scale_to_zero": True}),
        ("policy", "allowed_regions", [hostile(rng)] * rng.randint(0, 3)),
    ])


def paths(node: object, prefix: tuple = ()):
    """Every (path, value) below node."""
    yield prefix, node
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        yield from paths(v, prefix + (k,))


def mutate_tree(doc: dict, rng: random.Random) -> str:
    """Change one place of the parsed document: replace, drop, rename or add a key."""
    places = [p for p in paths(doc) if p[0]]
    if not places:  # earlier mutations left an empty document
        return "none"
    path, _ = rng.choice(places)
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    key, op = path[-1], rng.choice(["replace", "replace", "drop", "rename", "add", "optional", "optional"])
    if op == "optional":
        section, field, value = optional(rng)
        config = doc.get("config")
        deployment = config.get("inferry:deployment") if isinstance(config, dict) else None
        if isinstance(deployment, dict) and isinstance(deployment.get(section), dict):
            deployment[section] = value if field == "*" else {**deployment[section], field: value}
    elif op == "replace":
        parent[key] = hostile(rng)
    elif op == "drop":
        del parent[key]
    elif isinstance(parent, dict) and op == "rename":
        parent[rng.choice([str(key) + "x", str(key)[:-1], "", 1, None, str(key).upper()])] = parent.pop(key)
    elif isinstance(parent, dict):
        parent[rng.choice(["extra", "", 7, str(key) + "_"])] = hostile(rng)
    return op


def mutate_text(text: str, rng: random.Random) -> str:
    """Change the YAML text itself: what no parsed document can hold."""
    lines = text.split("\n")
    i = rng.randrange(len(lines))
    op = rng.choice(["dup_line", "tag", "alias", "bomb", "deep", "noise", "truncate", "indent", "hugenum"])
    if op == "dup_line":
        lines.insert(i, lines[i])
    elif op == "tag" and ": " in lines[i]:
        lines[i] = lines[i].replace(": ", ": " + rng.choice(TAGS), 1)
    elif op == "alias":
        values = [n for n, line in enumerate(lines) if ": " in line and not line.rstrip().endswith(":")]
        a, b = sorted(rng.sample(values, 2)) if len(values) > 1 else (0, 0)
        if a != b:
            lines[a] = lines[a].replace(": ", ": &a ", 1)
            lines[b] = lines[b].split(": ", 1)[0] + ": *a"
    elif op == "bomb":
        target = rng.choice([n for n, line in enumerate(lines) if ": " in line] or [0])
        lines[target] = lines[target].split(": ", 1)[0] + ": *l8"
        lines.insert(0, BOMB)
    elif op == "deep" and ": " in lines[i]:
        n = rng.choice([5, 31, 33, 100, 600, 3000])
        lines[i] = lines[i].split(": ", 1)[0] + ": " + "[" * n + "1" + "]" * n
    elif op == "noise":
        at = rng.randrange(len(lines[i]) + 1)
        lines[i] = lines[i][:at] + rng.choice(NOISE) + lines[i][at + rng.randint(0, 2):]
    elif op == "truncate":
        return "\n".join(lines)[: rng.randrange(len(text) + 1)]
    elif op == "indent":
        lines[i] = " " * rng.randint(0, 9) + lines[i].lstrip()
    elif op == "hugenum":
        lines[i] = lines[i].replace("0.9", "9" * rng.choice([400, 4300, 5000]), 1).replace("8000", "8" * 500, 1)
    return "\n".join(lines)


def mutant(rng: random.Random, seeds: list[tuple[str, dict]]) -> tuple[str, str]:
    """(description, stack text): 1-3 mutations of one example."""
    text, doc = rng.choice(seeds)
    doc, ops = copy.deepcopy(doc), []
    if rng.random() < 0.5:
        for _ in range(rng.randint(1, 3)):
            ops.append(mutate_tree(doc, rng))
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    for _ in range(rng.randint(0 if ops else 1, 2)):
        text = mutate_text(text, rng)
        ops.append("text")
    return "+".join(ops), text


def run_once(path: Path) -> tuple[str, float, str]:
    """(outcome, seconds, detail) of `inferry validate path`, stopped after HARD_S."""
    # Strict UTF-8 like a terminal's: text that cannot be printed fails here as it would there.
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
    signal.setitimer(signal.ITIMER_REAL, HARD_S)
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            validate(str(path))
        outcome, detail = "accepted", ""
    except typer.Exit as e:  # the command printed the InferryError and exits 1
        outcome, detail = ("clean error", "") if e.exit_code == 1 else ("traceback", f"exit {e.exit_code}")
    except Hang:
        outcome, detail = "hang", f"stopped after {HARD_S} s"
    except Exception:  # noqa: BLE001 - the finding this benchmark counts
        outcome, detail = "traceback", traceback.format_exc(limit=-8)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    printed = out.buffer.getvalue().decode("utf-8")
    if "Traceback" in printed:
        outcome, detail = "traceback", printed
    return outcome, time.perf_counter() - start, "\n".join(line[:300] for line in detail[-3000:].splitlines())


def main() -> int:
    """Run the mutants; print the counts and the first failures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", type=Path, help="save failing mutants here")
    args = ap.parse_args()
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(Hang()))
    seeds = [(p.read_text(), yaml.safe_load(p.read_text())) for p in EXAMPLES]
    rng, counts, failures, slowest = random.Random(args.seed), Counter(), [], 0.0
    ops_seen: Counter = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "Pulumi.fuzz.yaml"
        run_once(EXAMPLES[0])  # imports and caches warm outside the measured runs
        t0 = time.perf_counter()
        for n in range(args.count):
            ops, text = mutant(rng, seeds)
            ops_seen.update(ops.split("+"))
            path.write_text(text, encoding="utf-8", errors="surrogatepass")
            outcome, seconds, detail = run_once(path)
            slowest = max(slowest, seconds)
            counts[outcome] += 1
            counts["over 2 s"] += seconds > SLOW_S
            if outcome in ("traceback", "hang") or seconds > SLOW_S:
                failures.append((n, ops, outcome, seconds, detail))
                if args.keep:
                    args.keep.mkdir(parents=True, exist_ok=True)
                    (args.keep / f"Pulumi.fuzz-{n}.yaml").write_text(text, errors="surrogatepass")
        total = time.perf_counter() - t0
    print(f"mutants: {args.count} (seed {args.seed}) in {total:.0f} s, {1000 * total / args.count:.1f} ms each, "
          f"slowest {slowest:.2f} s")
    print("mutations: " + ", ".join(f"{k} {v}" for k, v in sorted(ops_seen.items())))
    for label in ("accepted", "clean error", "traceback", "hang", "over 2 s"):
        print(f"  {label:12} {counts[label]}")
    for n, ops, outcome, seconds, detail in failures[:5]:
        print(f"\n#{n} ({ops}) {outcome} in {seconds:.2f} s\n{detail}")
    return 0 if counts["traceback"] == counts["hang"] == counts["over 2 s"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
