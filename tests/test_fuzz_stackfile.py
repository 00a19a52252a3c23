"""Property: any YAML document or mutated example yields a config or an InferryError naming a field."""
from __future__ import annotations

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.errors import ConfigError, InferryError
from infra.stackfile import load_stack
from tests.conftest import STACKS

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False),
                    st.text(max_size=12))
documents = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)), max_leaves=20)
EXAMPLES = [yaml.safe_load(p.read_text()) for p in STACKS]


def paths(node, prefix=()):
    """Every (path, value) in a nested document."""
    yield prefix, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, prefix + (i,))


def set_at(doc, path, value):
    node = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value


def check(tmp_path, doc_text: str) -> None:
    path = tmp_path / "Pulumi.fuzz.yaml"
    path.write_text(doc_text)
    try:
        load_stack(str(path))
    except ConfigError as e:
        assert e.problems and all(p.path or p.message for p in e.problems)
        assert all(isinstance(p.render(), str) for p in e.problems)
    except InferryError:
        pass


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(doc=documents)
def test_arbitrary_documents(tmp_path, doc):
    check(tmp_path, yaml.safe_dump(doc))


@SETTINGS
@given(doc=documents)
def test_arbitrary_deployment_objects(tmp_path, doc):
    check(tmp_path, yaml.safe_dump({"config": {"inferry:deployment": doc}}))


@SETTINGS
@given(data=st.data())
def test_mutated_examples(tmp_path, data):
    import copy

    doc = copy.deepcopy(data.draw(st.sampled_from(EXAMPLES)))
    candidates = [p for p, _ in paths(doc) if p]
    for _ in range(data.draw(st.integers(1, 3))):
        candidates = [p for p, _ in paths(doc) if p]
        target = data.draw(st.sampled_from(candidates))
        try:
            set_at(doc, target, data.draw(documents))
        except (KeyError, IndexError, TypeError):
            pass
    check(tmp_path, yaml.safe_dump(doc))


@SETTINGS
@given(text=st.text(max_size=200))
def test_arbitrary_text(tmp_path, text):
    check(tmp_path, text)
