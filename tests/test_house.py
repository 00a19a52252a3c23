"""The house: infra/ in rooms on floors (only the door, the checks and the errors at the top), no arrow up, no
import circle, tests beside what they test."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOOR = {"__init__.py", "program.py", "errors.py", "checks.py"}
# The floors, bottom up: a module imports only its own floor and those below. errors sits beside stack at the
# bottom; render/ keeps what every target shares (templates, quoting), so it stands beside the engines it lays out,
# and gateway/ (the Caddy config every target runs in front of them) beside it;
# infra/checks.py gathers every room's validate checks and program.py is the door, so both are at the top, with
# component/ (the Deployment component that the door and a user's own program construct).
FLOORS = (("errors", "stack"), ("sizing", "engines", "storage", "render", "gateway"), ("targets",), ("lifecycle", "privacy"),
          ("checks", "program", "component"))


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_nodes(tree: ast.AST):
    """Every node but those under `if TYPE_CHECKING:` (annotations only: never imported when the code runs)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


def import_graph() -> dict[str, set[str]]:
    """Module -> the infra modules it imports anywhere in its body (function-level imports count: they circle too)."""
    modules = {_module(p): p for p in (ROOT / "infra").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("infra"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    deps.add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.startswith("infra"))
        # A package's own __init__ is not a dependency of its modules' circle (Python imports it first anyway).
        graph[name] = {d for d in deps if d in modules and d != name and not name.startswith(d + ".")}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_only_the_door_and_the_errors_sit_at_the_top_of_infra():
    loose = sorted(p.name for p in (ROOT / "infra").glob("*.py") if p.name not in DOOR)
    assert loose == [], f"move these into a room of infra/: {loose}"


def floor(module: str) -> int:
    """The floor of an infra module (its room: the part after infra.)."""
    room = module.split(".")[1] if "." in module else "stack"  # infra/__init__.py: a docstring, at the bottom
    return next(i for i, rooms in enumerate(FLOORS) if room in rooms)


def arrows_up(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module on a higher floor (function-level imports count; TYPE_CHECKING ones do not)."""
    return [f"{m} -> {d}" for m, deps in sorted(graph.items()) for d in sorted(deps) if floor(d) > floor(m)]


def test_every_room_is_on_a_floor():
    rooms = {p.name for p in (ROOT / "infra").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    rooms |= {p.stem for p in (ROOT / "infra").glob("*.py")} - {"__init__"}
    assert rooms - {r for f in FLOORS for r in f} == set(), "put the new room on a floor in FLOORS"


def test_no_import_goes_up_a_floor():
    assert arrows_up(import_graph()) == []


def test_the_floor_check_finds_an_arrow_up():
    graph = {"infra.stack.validate": {"infra.targets.ssh.checks"}, "infra.targets.ssh.checks": {"infra.stack.config"},
             "infra.stack.config": set()}
    assert arrows_up(graph) == ["infra.stack.validate -> infra.targets.ssh.checks"]


def test_no_import_circle_in_infra():
    assert circles(import_graph()) == []


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_test_module_sits_in_the_folder_of_what_it_tests():
    top = sorted(p.name for p in (ROOT / "tests").glob("test_*.py"))
    # The house itself, the door (infra/program.py) and the package as installed.
    assert top == ["test_house.py", "test_package.py", "test_program.py"]
    for folder in {p.parent for p in (ROOT / "tests").rglob("test_*.py")} - {ROOT / "tests"}:
        rel = folder.relative_to(ROOT / "tests")
        mirrored = (ROOT / "infra" / rel).is_dir() or (ROOT / rel).is_dir()  # tests/cli mirrors cli/
        assert rel.parts[0] == "support" or mirrored, f"tests/{rel} mirrors no folder of infra/ or cli/"


def test_only_the_targets_ask_which_target_it_is():
    """A target is chosen through infra.targets.registry: nothing else compares target.kind or its class."""
    asks = re.compile(r"target\.kind\s*[!=]=|isinstance\([^)]*\b(SshTarget|KubernetesTarget)\b")
    found = [f"{p.relative_to(ROOT)}:{n}" for folder in ("infra", "cli") for p in sorted((ROOT / folder).rglob("*.py"))
             if "targets" not in p.relative_to(ROOT).parts
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if asks.search(line)]
    assert found == []
