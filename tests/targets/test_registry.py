"""The target registry: every kind has a descriptor; an unknown kind is refused with a did-you-mean."""
from __future__ import annotations

import pytest

from infra.errors import InferryError
from infra.targets.registry import kinds, target_for


def test_every_kind_maps_to_its_descriptor():
    assert kinds() == ("ssh", "kubernetes")
    assert all(target_for(k).kind == k for k in kinds())


def test_an_unknown_kind_is_refused_with_a_did_you_mean():
    with pytest.raises(InferryError) as e:
        target_for("kubernets")
    assert "did you mean 'kubernetes'?" in e.value.render() and e.value.where == "target.kind"
