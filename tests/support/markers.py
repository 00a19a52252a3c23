"""Markers by the real systems a test drives (`pytest -m real_engine`, `-m docker`, ...), set at collection.

A test is marked by the fixtures it uses, directly or through other fixtures (item.fixturenames is the whole
closure), and `real_engine` also by the code it runs: the test function, its fixtures and the helpers they
call in its own module, read for the names that put the real Pulumi CLI to work (tests/support/realengine).
A test that starts a system some other way says so with `pytestmark` (tests/test_markers.py checks that).
"""
from __future__ import annotations

import inspect
import types

import pytest

# What each marker selects; pyproject.toml registers the same names (--strict-markers).
BY_FIXTURE = {
    "host_network": "ssh_hosts", "make_hosts": "ssh_hosts",  # tests/support/hosts
    "s3_server": "s3", "s3_server_factory": "s3",  # tests/support/servers
    "cluster": "cluster",  # tests/support/cluster.py
    "sglang_python": "engine_parser",  # scripts/engine_tier.sh's venv: the engine's own code
    "vllm_python": "engine_parser",
}
# Names whose use means the real Pulumi CLI runs (or must be there): a Project, or the PATH that holds it.
REAL_ENGINE_NAMES = {"Project", "tools_path", "TOOLS_BIN"}


def _codes(fn, module: str, seen: set) -> list[types.CodeType]:
    """fn's code, its nested code (closures, lambdas) and that of the functions of `module` it names."""
    code = getattr(getattr(fn, "__wrapped__", fn), "__code__", None)
    if code is None or code in seen:
        return []
    seen.add(code)
    out, stack = [], [code]
    while stack:
        c = stack.pop()
        out.append(c)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    glob = getattr(fn, "__globals__", {})
    for c in list(out):
        for name in c.co_names:
            f = glob.get(name)
            if inspect.isfunction(f) and f.__module__ == module:
                out.extend(_codes(f, module, seen))
    return out


def drives_real_engine(item: pytest.Function) -> bool:
    """Whether the test, its own module's fixtures or helpers name what runs the real Pulumi CLI."""
    module = item.module.__name__
    fns = [item.function] + [d.func for defs in item._fixtureinfo.name2fixturedefs.values() for d in defs
                             if d.func.__module__ == module]
    seen: set = set()
    for fn in fns:
        for code in _codes(fn, module, seen):
            # `from tests.support.realengine import X` inside a function: the module and X are in co_names
            if REAL_ENGINE_NAMES & set(code.co_names) or "tests.support.realengine" in code.co_names:
                return True
    return False


def pytest_collection_modifyitems(items):
    for item in items:
        if not isinstance(item, pytest.Function):
            continue
        names = {BY_FIXTURE[f] for f in item.fixturenames if f in BY_FIXTURE}
        if drives_real_engine(item):
            names.add("real_engine")
        for name in sorted(names - {m.name for m in item.iter_markers()}):
            item.add_marker(name)
