"""The rollout watch reaches the cluster with the kubeconfig as pulumi-kubernetes takes it: a file's path (with
~), YAML contents or one line of JSON contents (pulumi_eks's kubeconfig_json); bad contents fail without their text."""
from __future__ import annotations

import json

import pytest
import yaml

from infra.errors import InferryError
from infra.targets.kubernetes.rollout import api_client, is_contents

TOKEN = "tok-" + "3" * 40


def kubeconfig(server: str) -> dict:
    """A kubeconfig with one context, `gpus`, and a token user."""
    return {"apiVersion": "v1", "kind": "Config", "current-context": "gpus",
            "clusters": [{"name": "gpus", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
            "users": [{"name": "me", "user": {"token": TOKEN}}],
            "contexts": [{"name": "gpus", "context": {"cluster": "gpus", "user": "me"}}]}


@pytest.mark.parametrize("form", [json.dumps, yaml.safe_dump, lambda d: json.dumps(d, indent=2)])
def test_contents_as_yaml_or_json_reach_their_server(form):
    text = form(kubeconfig("https://10.9.8.7:6443"))
    assert is_contents(text)
    api = api_client(text, "gpus")
    assert api.configuration.host == "https://10.9.8.7:6443"
    assert api.configuration.api_key["BearerToken"] == f"Bearer {TOKEN}"


def test_a_path_is_read_as_a_file_with_the_home_folder_expanded(tmp_path, monkeypatch):
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "gpus").write_text(yaml.safe_dump(kubeconfig("https://10.9.8.6:6443")))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert not is_contents("~/.kube/gpus")
    assert api_client("~/.kube/gpus", "gpus").configuration.host == "https://10.9.8.6:6443"


@pytest.mark.parametrize("text", ['{"users": [{"user": {"token": "%s"}}' % TOKEN, f"- not\n- a mapping {TOKEN}\n"])
def test_contents_that_are_no_kubeconfig_fail_without_their_text(text):
    with pytest.raises(InferryError) as e:
        api_client(text, "gpus")
    assert "target.kubeconfig" in str(e.value) and TOKEN not in str(e.value)


def test_a_settled_wait_outlasts_the_old_pod_still_draining(monkeypatch):
    """A gateway's rollout counts as done only once its old pod, draining with the old config, is gone;
    an engine's (settled=False) as soon as the Deployment is available."""
    from types import SimpleNamespace as NS

    from infra.targets.kubernetes import rollout

    dep = NS(metadata=NS(generation=2), spec=NS(replicas=1, selector=NS(match_labels={"app": "gw"})),
             status=NS(observed_generation=2, conditions=[NS(type="Available", status="True")], updated_replicas=1,
                       replicas=1, available_replicas=1, ready_replicas=1))
    new = NS(metadata=NS(name="gw-new", deletion_timestamp=None), status=NS(conditions=[], container_statuses=[],
                                                                           init_container_statuses=[]))
    old = NS(metadata=NS(name="gw-old", deletion_timestamp="2026-12-06T03:00:00Z"), status=new.status)
    lists = []  # the pods each poll sees: the old one drains for two polls

    class Core:
        def list_namespaced_pod(self, _ns, label_selector):
            assert label_selector == "app=gw"
            lists.append(1)
            return NS(items=[new, old] if len(lists) <= 2 else [new])

    apps = NS(read_namespaced_deployment=lambda _n, _ns: dep)
    monkeypatch.setattr(rollout, "_apis", lambda _w: (apps, Core()))
    monkeypatch.setattr(rollout.time, "sleep", lambda _s: None)
    w = rollout.Watch("k", None, "ns", "gw", 60, 600)
    rollout.wait(w)
    assert len(lists) == 1
    lists.clear()
    rollout.wait(rollout.Watch("k", None, "ns", "gw", 60, 600, settled=True))
    assert len(lists) == 3
    assert rollout.terminating([new, old]) == ["gw-old"]
