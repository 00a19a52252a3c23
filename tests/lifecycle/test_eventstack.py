"""EventStack: outputs and change counts from the engine's events, no `stack select`, a new stack created."""
from __future__ import annotations

import json

import yaml

from pulumi.automation import EngineEvent

from infra.lifecycle.eventstack import MASKED, SECRET_SIG, Seen, unmasked
from tests.conftest import ROOT
from tests.support.realengine import Project

SECRET = {SECRET_SIG: "1b47061264138c4ac30d75fd1eb44270", "ciphertext": MASKED}  # as the engine sends one


def outputs_event(op: str, outputs: dict) -> EngineEvent:
    """A resOutputsEvent for the root stack, shaped as the Pulumi CLI v3.274 streams it."""
    urn = "urn:pulumi:s::inferry::pulumi:pulumi:Stack::inferry-s"
    state = {"type": "pulumi:pulumi:Stack", "urn": urn, "id": "", "parent": "", "provider": "", "inputs": {},
             "outputs": outputs}
    return EngineEvent.from_json({"sequence": 7, "timestamp": 1, "resOutputsEvent": {"metadata": {
        "op": op, "urn": urn, "type": "pulumi:pulumi:Stack", "provider": "", "old": state, "new": state}}})


def test_secrets_anywhere_in_a_value_stay_masked():
    assert unmasked({"a": [1, SECRET], "b": "x"}) == ({"a": [1, MASKED], "b": "x"}, True)
    assert unmasked(SECRET) == (MASKED, True)
    assert unmasked(["http://h:8080/v1"]) == (["http://h:8080/v1"], False)


def test_seen_keeps_the_root_outputs_and_the_summary_counts():
    seen = Seen("up")
    seen(outputs_event("same", {"endpoint": "http://h:8080/v1", "key": SECRET}))
    assert seen.changes is None  # no summary yet: EventStack would still ask the CLI
    seen(EngineEvent.from_json({"sequence": 9, "timestamp": 2, "summaryEvent": {
        "maybeCorrupt": False, "durationSeconds": 1, "resourceChanges": {"same": 11}, "PolicyPacks": {}}}))
    assert seen.changes == {"same": 11}
    assert {k: (v.value, v.secret) for k, v in seen.outputs.items()} == {
        "endpoint": ("http://h:8080/v1", False), "key": (MASKED, True)}


def test_a_stack_the_backend_lacks_is_created_by_the_first_command(tmp_path, installed):
    """No `stack select` runs any more: the first command meets "no stack named", creates it, runs again."""
    project = Project(tmp_path / "p", installed[1])
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.eu-ssh.yaml").read_text())
    keys = [k.split(":", 1)[1] for k, v in doc["config"].items() if isinstance(v, dict) and "secure" in v]
    project.write_stack("eu-ssh", doc["config"]["inferry:deployment"], {k: f"placeholder-{k}" for k in keys})
    project.pulumi("stack", "rm", "--yes", "--preserve-config", "eu-ssh")  # the file stays, the backend forgets
    assert json.loads(project.pulumi("stack", "ls", "--json").stdout) == []
    assert project.inferry("outputs", "eu-ssh", "--json").stdout.strip() == "{}"
    listed = json.loads(project.pulumi("stack", "ls", "--json").stdout)
    assert [s["name"] for s in listed] == ["eu-ssh"]
    assert project.inferry("outputs", "eu-ssh", "--json").stdout.strip() == "{}"  # exists now: no second create
