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
