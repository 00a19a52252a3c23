"""The one loader: a stack file (CLI) or pulumi.Config (program) -> a validated Stack."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from infra.stack.config import Deployment
from infra.errors import ConfigError, InferryError, Problem
from infra.stack.resources import example_stack
from infra.stack.configkeys import (DEPLOYMENT_KEY, MISSING, NAMESPACE, misspelt_deployment,
                                    misspelt_deployment_problem, missing_deployment_problem, split_config,
                                    unused_secret_problems)
from infra.stack.problems import bounded, short
from infra.stack.project import project_root
from infra.stack.validate import checked
from infra.stack.secretfix import STACK as SECRET_STACK
from infra.stack.secrets import ciphertext_problems, is_secure, plain_text_problems, reference_problems

# Pulumi's own rule (sdk/go/common/workspace/project.go, validateStackName): 1-100 of these characters.
STACK_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


@dataclass(frozen=True)
class Stack:
    """A validated stack: its name, where it came from, its deployment and warnings about its config keys."""

    name: str
    source: str
    deployment: Deployment
    path: Path | None = None
    warnings: tuple[Problem, ...] = ()


def stack_path(stack: str, root: Path | None = None, examples: bool = True) -> tuple[str, Path]:
    """(stack name, file) for a stack name under the project's stacks/ or a path to a stack file. A name with
    no file there that names a bundled example (eu-ssh...) reads the example the package ships."""
    p = Path(stack)
    if stack and (p.suffix in (".yaml", ".yml") or p.exists() or os.sep in stack):
        name = p.name.removeprefix("Pulumi.").rsplit(".", 1)[0]
        return _check_name(name, stack), p
    path = (root or project_root()) / "stacks" / f"Pulumi.{_check_name(stack, stack)}.yaml"
    return stack, path if path.exists() or not examples else (example_stack(stack) or path)


def _check_name(name: str, given: str) -> str:
    """The stack name, or an InferryError: Pulumi refuses other names later, after work was done."""
    if not STACK_NAME.fullmatch(name):
        raise InferryError(f"invalid stack name {name!r}: Pulumi stack names are 1-100 letters, digits, "
                           "'-', '_' or '.'", "choose a name such as eu-ssh (for a path: Pulumi.eu-ssh.yaml)",
                           where=given or "STACK")
    return name


# Bounds checked while the file is parsed, before anything walks its values. A stack file is a few KB with a
# few hundred values about 8 levels deep; these leave ample room and refuse what would exhaust the machine:
# an alias bomb (each alias multiplies what validation visits: 2 KB can stand for billions of values) and
# nesting that would exhaust Python's stack.
MAX_BYTES = 256 * 1024
MAX_DEPTH = 32
MAX_NODES = 5_000
_TAG = "tag:yaml.org,2002:"
_SCALARS = {_TAG + t for t in ("null", "bool", "int", "float", "str", "merge")}
_SURROGATE = re.compile("[\ud800-\udfff]")
_LIMITS_HINT = "a stack file is a few KB of plain mappings and lists: check you passed the right file"


class StackYAMLError(yaml.MarkedYAMLError):
    """YAML that inferry refuses to read: too deep, too many values, a duplicate key or a refused tag."""

    def __init__(self, problem: str, mark: Any, hint: str | None = None):
        super().__init__(problem=problem, problem_mark=mark)
        self.hint = hint


class StackLoader(yaml.SafeLoader):
    """SafeLoader, bounded (MAX_DEPTH, MAX_NODES after alias expansion), refusing duplicate keys, with the
    scalars of YAML 1.2 as Pulumi reads the same file (yaml.v3): only true/false are booleans (yes, no, on,
    off are strings), 8.03e9 is a float, 1:30 and 2024-01-01 are strings, and no tags beyond the JSON types."""

    yaml_implicit_resolvers = {first: [(tag, rx) for tag, rx in rs if tag in (_TAG + "null", _TAG + "merge")]
                               for first, rs in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    yaml_constructors = {tag: fn for tag, fn in yaml.SafeLoader.yaml_constructors.items()
                         if tag in {_TAG + t for t in ("null", "bool", "int", "float", "str", "seq", "map")}}
    bool_values = {"true": True, "false": False}

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = self._total = 0
        self._measure: dict[int, tuple[int, int]] = {}  # id(node) -> (values below it, aliases expanded; height)

    def fetch_flow_collection_start(self, token_class: Any) -> None:
        # The scanner reads ahead of the composer, in time quadratic in the flow nesting: bound it here too.
        if self.flow_level >= MAX_DEPTH:
            raise StackYAMLError(f"nested deeper than {MAX_DEPTH} levels", self.get_mark(), _LIMITS_HINT)
        super().fetch_flow_collection_start(token_class)

    def add_indent(self, column: int) -> bool:
        if self.indent < column and len(self.indents) >= MAX_DEPTH:
            raise StackYAMLError(f"nested deeper than {MAX_DEPTH} levels", self.get_mark(), _LIMITS_HINT)
        return super().add_indent(column)

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)
            if id(node) not in self._measure:  # its anchor is still open: the alias is inside what it names
                raise StackYAMLError("an alias refers to a mapping or list that contains it", event.start_mark,
                                     "write the values out")
            size, height = self._measure[id(node)]
            self._count(size, self._depth + height, event.start_mark)
            return node
        self._depth += 1
        self._count(1, self._depth, event.start_mark)
        node = super().compose_node(parent, index)
        self._depth -= 1
        if isinstance(node, yaml.MappingNode):
            self._refuse_duplicates(node)
        children = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else (
            node.value if isinstance(node, yaml.SequenceNode) else [])
        sizes = [self._measure[id(c)] for c in children]
        self._measure[id(node)] = (1 + sum(s for s, _ in sizes), 1 + max((h for _, h in sizes), default=0))
        return node

    def _count(self, size: int, reach: int, mark: Any) -> None:
        """Add size values reaching down to level reach; refuse past the bounds."""
        self._total += size
        if reach > MAX_DEPTH:
            raise StackYAMLError(f"nested deeper than {MAX_DEPTH} levels", mark, _LIMITS_HINT)
        if self._total > MAX_NODES:
            raise StackYAMLError(f"more than {MAX_NODES} values (counting each use of an alias in full)", mark,
                                 _LIMITS_HINT + "; write values out instead of repeating aliases")

    def _refuse_duplicates(self, node: yaml.MappingNode) -> None:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            if key_node.tag not in _SCALARS:
                continue  # a list or mapping as a key, or an odd tag: the constructor refuses it
            key = "<<" if key_node.tag == _TAG + "merge" else self.construct_object(key_node)
            if key in seen:
                raise StackYAMLError(f"duplicate key {short(key)} (first at line {seen[key].line + 1}); "
                                     "only one of them would be used", key_node.start_mark,
                                     "keep one and delete the other")
            seen[key] = key_node.start_mark

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        # PyYAML's own on bad scalars (`!!int ""` is an IndexError)
        except (ValueError, KeyError, IndexError, AttributeError, TypeError, OverflowError):
            text = short(node.value) if isinstance(node, yaml.ScalarNode) else "this value"
            raise StackYAMLError(f"cannot read {text} as {node.tag.replace(_TAG, '!!')}", node.start_mark,
                                 "fix the value, or its tag") from None

    def construct_yaml_str(self, node: Any) -> str:
        value = super().construct_yaml_str(node)
        if _SURROGATE.search(value):  # a "\ud800" escape: no UTF-8 file, terminal or Pulumi can hold it
            raise StackYAMLError("not valid Unicode (a lone surrogate, written as an escape such as \\ud800)",
                                 node.start_mark, "remove the escape")
        return value

    def construct_undefined(self, node: Any) -> Any:
        raise StackYAMLError(f"the tag {short(node.tag.replace(_TAG, '!!'))} is not allowed", node.start_mark,
                             "stack values are strings, numbers, true/false, null, lists and mappings: "
                             "remove the tag")


StackLoader.add_constructor(None, StackLoader.construct_undefined)
StackLoader.add_constructor(_TAG + "str", StackLoader.construct_yaml_str)
StackLoader.add_implicit_resolver(_TAG + "bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
StackLoader.add_implicit_resolver(_TAG + "int", re.compile(
    r"^[-+]?(?:0b[01_]+|0o[0-7_]+|0x[0-9a-fA-F_]+|0[0-7_]*|[1-9][0-9_]*)$"), list("-+0123456789"))
StackLoader.add_implicit_resolver(_TAG + "float", re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+.0123456789"))


def load_yaml(text: str) -> Any:
    """One YAML document read with StackLoader; StackYAMLError or yaml.YAMLError when refused."""
    if len(text) > MAX_BYTES:
        raise StackYAMLError(f"larger than {MAX_BYTES // 1024} KiB", None, _LIMITS_HINT)
    loader = StackLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def read_yaml(path: Path) -> Any:
    """Parse a stack file (bounded, see StackLoader); every refusal is a ConfigError with line and column."""
    if path.is_dir():
        raise ConfigError(str(path), [Problem("", "is a folder, not a stack file",
                                              hint="pass a stack name or a file such as stacks/Pulumi.eu-ssh.yaml")])
    if not path.is_file():
        hint = f"create it with `inferry init {path.name.removeprefix('Pulumi.').removesuffix('.yaml')}`"
        raise ConfigError(str(path), [Problem("", "stack file not found", hint=hint)])
    try:
        if path.stat().st_size > MAX_BYTES:  # never read a huge file (load_yaml checks the text, too)
            raise StackYAMLError(f"larger than {MAX_BYTES // 1024} KiB", None, _LIMITS_HINT)
        return load_yaml(path.read_text(encoding="utf-8"))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        if isinstance(e, StackYAMLError):
            what = f"{where}: {e.problem}" if mark else e.problem
            raise ConfigError(str(path), [Problem("", what, hint=e.hint)]) from None
        raise ConfigError(str(path), [Problem("", f"YAML syntax error at {where}: {e.problem or e}")]) from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ConfigError(str(path), [Problem("", f"not readable as YAML: {e}")]) from None
    except OSError as e:
        raise ConfigError(str(path), [Problem("", f"cannot read the stack file: {e.strerror}",
                                              hint="check the file's permissions")]) from None


def parse_deployment(raw: Any, source: str, prefix: str = DEPLOYMENT_KEY, stack: str | None = None) -> Deployment:
    """Validate one deployment object; ConfigError lists every problem by field path (fixes that name the
    stack name this one, when given)."""
    if not isinstance(raw, dict):
        raise ConfigError(source, [Problem(prefix, "expected a mapping of sections",
                                           type(raw).__name__ if raw is not None else "nothing",
                                           hint="put model, engine, target, storage, provider and serving "
                                           "under it (see `inferry init NAME`)")])
    d, problems = checked(raw)
    if d is None:
        raise ConfigError(source, [bounded(_named(p, stack)) for p in problems])
    return d


def _named(p: Problem, stack: str | None) -> Problem:
    if stack is None or not p.hint or f"--stack {SECRET_STACK} " not in p.hint:
        return p
    return replace(p, hint=p.hint.replace(f"--stack {SECRET_STACK} ", f"--stack {stack} "))


def load_stack(stack: str, root: Path | None = None, uses: frozenset[str] | None = None) -> Stack:
    """Load and validate a stack file for the CLI (no Pulumi CLI needed). uses: the secret fields the command
    reads (None: every one); the others' Pulumi secrets need not be set yet (plain-text secrets are refused)."""
    name, path = stack_path(stack, root)
    doc = read_yaml(path)
    raw, others, problems = split_config(doc)
    d, warnings = None, []
    if raw is not MISSING:  # null is not missing: parse_deployment says what a deployment must be
        try:
            d = parse_deployment(raw, str(path), stack=name)
        except ConfigError as e:
            problems += e.problems
    # Passphrase and cloud (KMS) secrets providers write v1: ciphertexts; only the Pulumi Cloud one differs.
    v1_only = isinstance(doc, dict) and bool({"encryptionsalt", "encryptedkey"} & doc.keys())
    cipher, refs = ciphertext_problems(others, name, v1_only=v1_only), []
    if d is not None:
        referenced = {r.config for r in d.secret_refs().values() if r.config}
        refs = reference_problems(d, name, lambda k: is_secure(others.get(k)), lambda k: k in others, others)
        refs += plain_text_problems(others, referenced, name)
        warnings = unused_secret_problems(others, referenced, name)
        if uses is not None:  # the secrets the command does not read: neither set nor well-formed is needed
            unused = {f: r for f, r in d.secret_refs().items() if f not in uses}
            keys = {f"{NAMESPACE}:{r.config}" for r in unused.values() if r.config}
            cipher, refs = [p for p in cipher if p.path not in keys], [p for p in refs if p.path not in unused]
    problems += cipher + refs
    if problems or d is None:  # d is None only with a problem saying why
        raise ConfigError(str(path), [bounded(p) for p in problems])
    return Stack(name=name, source=str(path), deployment=d, path=path, warnings=tuple(warnings))


def load_from_pulumi() -> Stack:
    """Load and validate the running Pulumi program's config (pulumi.Config)."""
    import pulumi  # imported here: the CLI path must not need a Pulumi runtime

    cfg = pulumi.Config(NAMESPACE)
    source = f"stack {pulumi.get_stack()}"
    raw = cfg.get_object("deployment")
    if raw is None:
        typo = misspelt_deployment(_pulumi_config_keys())
        raise ConfigError(source, [misspelt_deployment_problem(typo) if typo else missing_deployment_problem()])
    d = parse_deployment(raw, source, stack=pulumi.get_stack())
    full = lambda k: f"{NAMESPACE}:{k}"  # noqa: E731
    problems = reference_problems(d, pulumi.get_stack(), lambda k: pulumi.runtime.is_config_secret(full(k)),
                                  lambda k: cfg.get(k) is not None)
    if problems:
        raise ConfigError(source, problems)
    return Stack(name=pulumi.get_stack(), source=source, deployment=d)


def _pulumi_config_keys() -> set[str]:
    """Every config key the running program was given (set by the engine, or PULUMI_CONFIG)."""
    from pulumi.runtime import config

    return set(config.CONFIG.get()) | set(config.get_config_env())
