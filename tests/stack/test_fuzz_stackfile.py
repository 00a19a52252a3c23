"""Property: `inferry validate` on any input prints OK or clean problems, never a traceback, in bounded time;
every stack it accepts round-trips (its deployment written back validates to the same Deployment)."""
from __future__ import annotations

import contextlib
import copy
import io
import json
from pathlib import Path

import pytest
import typer
import yaml
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from cli.stackcmds import validate
from infra.errors import ConfigError
from infra.stack.problems import short
from infra.stack.stackfile import MAX_DEPTH, StackLoader, load_stack, load_yaml
from infra.stack.validate import findings
from tests.conftest import ROOT

# Named, not globbed: the bundled examples every mutant starts from.
EXAMPLES = [ROOT / "stacks" / f"Pulumi.{name}.yaml" for name in ("eu-ssh", "aws-k8s", "staging")]
TEXTS = [p.read_text() for p in EXAMPLES]
DOCS = [load_yaml(t) for t in TEXTS]
SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                          HealthCheck.too_slow])
TAGS = ["!!python/object:os.system ", "!!python/name:os.system ", "!!binary ", "!!set ", "!!timestamp ", "!foo ",
        "!!int ", "!!float ", "!!bool ", "!!str ", "!!null ", "!!map ", "!!seq ", "!!omap "]
WORDS = ["null", "~", "true", "false", "off", "yes", "on", "8000", '"8000"', "'off'", "1e3", "8.03e9", "1:30",
         "2024-01-01", ".nan", ".inf", "-.inf", "0x1F", "0o17", "''", "<<", '"\\ud800"', "v1:abc:def"]
BOMB = "bomb: &l0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"bomb{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9))


class StackDumper(yaml.SafeDumper):
    """SafeDumper that quotes every string YAML 1.1 (PyYAML) or 1.2 (StackLoader, Pulumi) reads as another type."""


StackDumper.yaml_implicit_resolvers = {
    first: yaml.SafeDumper.yaml_implicit_resolvers.get(first, []) + StackLoader.yaml_implicit_resolvers.get(first, [])
    for first in {*yaml.SafeDumper.yaml_implicit_resolvers, *StackLoader.yaml_implicit_resolvers}}


def dump(doc: object) -> str:
    """YAML text that StackLoader reads back as doc."""
    return yaml.dump(doc, Dumper=StackDumper, sort_keys=False, allow_unicode=True)


def run_validate(path: Path) -> tuple[bool, str]:
    """(accepted, printed) from the `inferry validate` command's own function; any other exception fails."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)  # strict, as a terminal
    accepted = True
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            validate(str(path))
        except typer.Exit as e:  # the command printed an InferryError
            assert e.exit_code == 1
            accepted = False
    return accepted, out.buffer.getvalue().decode("utf-8")


def check(tmp_path: Path, text: str) -> bool:
    """Validate text as a stack file: OK, or an error with one clean bullet per problem. Returns accepted."""
    path = tmp_path / "Pulumi.fuzz.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    accepted, printed = run_validate(path)
    assert "Traceback" not in printed
    if not accepted:
        bullets = [line for line in printed.splitlines() if line.startswith("  • ")]
        assert printed.startswith("error: ") and bullets, printed
        try:  # the same problems, to look at: no found value is printed longer than a short repr
            found = findings(load_stack(str(path)).deployment)
        except ConfigError as e:
            found = e.problems
        assert found and all(p.found is None or len(p.found) <= 80 for p in found)
        return False
    *warnings, last = printed.rstrip("\n").split("\n")  # warnings (a price of 0...) may come first
    assert last.startswith("OK ") and all(w.startswith("  warning: ") for w in warnings), printed
    round_trip(path)
    return True


def fuzz(tmp_path: Path, text: str) -> None:
    """check(), counted: --hypothesis-show-statistics shows how many examples were accepted."""
    event("accepted" if check(tmp_path, text) else "refused")


def round_trip(path: Path) -> None:
    """The accepted deployment, written back into the same stack file, loads as the same Deployment."""
    first = load_stack(str(path)).deployment
    doc = load_yaml(path.read_text(encoding="utf-8"))
    doc["config"]["inferry:deployment"] = first.model_dump()
    again = path.with_name("Pulumi.fuzz-again.yaml")
    again.write_text(dump(doc), encoding="utf-8")
    assert load_stack(str(again)).deployment == first
    assert run_validate(again)[0]


@st.composite
def yaml_node(draw, depth: int = 0, anchors: list | None = None) -> str:
    """YAML text of one value: scalars of every kind, flow lists and mappings, anchors, aliases, tags,
    duplicate and non-string keys, deep nesting."""
    anchors = [] if anchors is None else anchors
    tag = draw(st.sampled_from(TAGS)) if draw(st.integers(0, 15)) == 0 else ""
    if anchors and draw(st.integers(0, 6)) == 0:
        return "*" + draw(st.sampled_from(anchors))
    if draw(st.integers(0, 12)) == 0:
        n = draw(st.sampled_from([MAX_DEPTH - 1, MAX_DEPTH + 1, 500]))
        return "[" * n + "1" + "]" * n
    if depth >= 3 or draw(st.booleans()):
        return tag + draw(st.one_of(st.sampled_from(WORDS), st.integers(-2**70, 2**70).map(str),
                                    st.integers(20, 5000).map(lambda n: "9" * n), st.floats().map(repr),
                                    st.text(max_size=12).map(json.dumps)))
    anchor = f"a{len(anchors)}"
    anchors.append(anchor)  # before its children: an alias among them is a recursive one, to be refused
    children = draw(st.lists(yaml_node(depth + 1, anchors), max_size=4))
    if draw(st.booleans()):
        return f"&{anchor} {tag}[" + ", ".join(children) + "]"
    keys = draw(st.lists(st.one_of(st.sampled_from(["model", "kind", "", "1", "true", "null", "<<", '"a"', "a"]),
                                   st.text(max_size=6).map(json.dumps)), min_size=len(children),
                         max_size=len(children)))
    return f"&{anchor} {tag}{{" + ", ".join(f"{k}: {v}" for k, v in zip(keys, children)) + "}"


def value_lines(text: str) -> list[int]:
    """Indexes of the lines that hold `key: value` (the places a value can be swapped)."""
    return [i for i, line in enumerate(text.split("\n")) if ": " in line and not line.lstrip().startswith("#")]


@st.composite
def mutated_text(draw) -> str:
    """An example stack with 1-3 text edits: a value swapped for a generated one, a line duplicated (duplicate
    key), an alias bomb, a line re-indented."""
    lines = draw(st.sampled_from(TEXTS)).split("\n")
    for _ in range(draw(st.integers(1, 3))):
        lines = "\n".join(lines).split("\n")  # an edit may have added lines
        i = draw(st.sampled_from(value_lines("\n".join(lines))))
        op = draw(st.sampled_from(["value", "value", "dup", "bomb", "indent"]))
        key = lines[i].split(": ", 1)[0]
        if op == "value":
            lines[i] = f"{key}: {draw(yaml_node())}"
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "bomb":
            lines[i] = f"{key}: *l8"
            lines.insert(0, BOMB)
        else:
            lines[i] = " " * draw(st.integers(0, 8)) + lines[i].lstrip()
    return "\n".join(lines)


PLAUSIBLE = {  # (section, field): values of the right type, odd but mostly valid
    ("serving", "port"): st.integers(1, 65535),
    ("engine", "max_model_len"): st.integers(16, 131072),
    ("engine", "gpu_memory_utilization"): st.floats(0.6, 1.0),
    ("engine", "enable_prefix_caching"): st.booleans(),
    ("engine", "extra_args"): st.lists(st.sampled_from([["--seed", "7"], ["--max-num-seqs=8"], ["--enforce-eager"]]),
                                       max_size=3).map(lambda args: [a for arg in args for a in arg]),
    ("provider", "name"): st.text(min_size=1, max_size=20).filter(lambda s: not any(0xD800 <= ord(c) < 0xE000
                                                                                   for c in s)),
    ("provider", "price_per_gpu_hour"): st.floats(0, 1e6),
    ("provider", "tokens_per_second"): st.one_of(st.none(), st.floats(1e-3, 1e9)),
    ("storage", "tags"): st.dictionaries(st.sampled_from(["team", "1e3", "off", "", "a b"]), st.sampled_from(
        ["x", "1:30", "yes", "8.03e9", "é", "null"])),
    ("target", "max_parallel"): st.integers(1, 256),
}


@st.composite
def plausible_stack(draw) -> str:
    """An example stack with a few fields set to typed values (the dumper quotes what would change type)."""
    doc = copy.deepcopy(draw(st.sampled_from(DOCS)))
    d = doc["config"]["inferry:deployment"]
    for (section, field), values in draw(st.lists(st.sampled_from(list(PLAUSIBLE.items())), max_size=4)):
        d[section] = {**d[section], field: draw(values)}
    return dump(doc)


HOSTILE = st.one_of(
    st.none(), st.booleans(), st.integers(), st.just(10**400), st.floats(), st.text(max_size=12),
    st.sampled_from(["8000", "off", "", "x" * 5000]),
    st.dictionaries(st.one_of(st.text(max_size=4), st.integers(), st.none()), st.integers(), max_size=3),
    st.lists(st.integers(), max_size=3), st.builds(lambda: {"secure": "hunter2"}))


def paths(node: object, prefix: tuple = ()):
    """Every (path, value) in a nested document."""
    yield prefix, node
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        yield from paths(v, prefix + (k,))


@st.composite
def mutated_tree(draw) -> str:
    """An example stack with 1-3 values replaced by hostile ones (NaN, inf, huge, non-string keys, ...)."""
    doc = copy.deepcopy(draw(st.sampled_from(DOCS)))
    for _ in range(draw(st.integers(1, 3))):
        path, _ = draw(st.sampled_from([p for p in paths(doc) if p[0]]))
        node = doc
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = draw(HOSTILE)
    return dump(doc)


@SETTINGS
@given(text=st.builds(lambda v: f"config:\n  inferry:deployment: {v}\n", yaml_node()))
@example(text="config:\n  inferry:deployment: " + "[" * 500 + "]" * 500 + "\n")
@example(text="config:\n  inferry:deployment:\n")
@example(text=BOMB + "config:\n  inferry:deployment: *l8\n")
@example(text="config:\n  inferry:deployment: !!python/object:os.system {}\n")
def test_generated_yaml_as_the_deployment(tmp_path, text):
    fuzz(tmp_path, text)


@SETTINGS
@given(text=yaml_node())
@example(text='&a0 [&a1 {}, &a2 {}, &a3 {}, !!int ""]')  # found by hypothesis: PyYAML's IndexError escaped
def test_generated_yaml_as_the_whole_file(tmp_path, text):
    fuzz(tmp_path, text)


@SETTINGS
@given(text=mutated_text())
def test_text_mutants_of_the_examples(tmp_path, text):
    fuzz(tmp_path, text)


@SETTINGS
@given(text=mutated_tree())
def test_value_mutants_of_the_examples(tmp_path, text):
    fuzz(tmp_path, text)


@SETTINGS
@given(text=plausible_stack())
def test_plausible_stacks_are_accepted_and_round_trip(tmp_path, text):
    fuzz(tmp_path, text)


@SETTINGS
@given(text=st.text(max_size=200))
def test_arbitrary_text(tmp_path, text):
    fuzz(tmp_path, text)


def test_the_examples_round_trip(tmp_path):
    for text in TEXTS:
        assert check(tmp_path, text)


# The YAML layer: bounded before anything walks the values (each case was a traceback or a hang).

def refusals(tmp_path: Path, text: str) -> list[str]:
    """The rendered problems load_stack reports for text."""
    path = tmp_path / "Pulumi.t.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_stack(str(path))
    return [p.render() for p in e.value.problems]


def test_nesting_500_deep_is_refused_with_its_line(tmp_path):
    [msg] = refusals(tmp_path, "config:\n  inferry:deployment:\n    model: " + "[" * 500 + "]" * 500 + "\n")
    assert msg.startswith("line 3, column ") and "nested deeper than 32 levels" in msg


@pytest.mark.parametrize("where", ["kind: ssh", "port: 8000", "region: es-madrid"])
def test_alias_bomb_is_refused_before_validation(tmp_path, where):
    [msg] = refusals(tmp_path, BOMB + TEXTS[0].replace(where, where.split(":")[0] + ": *l8", 1))
    assert "more than 5000 values (counting each use of an alias in full)" in msg and len(msg) < 300


def test_found_values_are_short_whatever_their_size():
    bomb: list = ["lol"] * 9
    for _ in range(30):  # 9**30 values when walked in full
        bomb = [bomb] * 9
    assert len(short(bomb)) <= 60 and len(short(10**5000)) <= 60 and len(short("x" * 10**6)) <= 60


@pytest.mark.parametrize("tag", ["!!python/object:os.system", "!!python/name:os.system", "!!binary", "!!set", "!foo"])
def test_tags_beyond_plain_values_are_refused(tmp_path, tag):
    [msg] = refusals(tmp_path, TEXTS[0].replace("runtime: docker", f"runtime: {tag} docker"))
    assert f"the tag '{tag}' is not allowed" in msg


def test_oversized_file_and_lone_surrogate_are_refused(tmp_path):
    assert refusals(tmp_path, "# " + "x" * 300_000)[0].startswith("larger than 256 KiB")
    assert "lone surrogate" in refusals(tmp_path, TEXTS[0].replace("region: es-madrid", 'region: "\\ud800"'))[0]
