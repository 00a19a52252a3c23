"""State written by the program before the Deployment component maps onto it: no create, delete or replace.

Real: the Pulumi CLI and engine, its file backend, the dynamic-provider plugin, an OpenSSH test host, an rclone
S3 store. The stack comes up with the program as it was before the component (PRE_COMPONENT, checked out of
this repository into a folder of its own), then the same project runs this tree's program: its children are now
parented to a Deployment component, and the aliases map every old URN onto its new one.
"""
from __future__ import annotations

import json
import subprocess

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.realengine import Project, model_store, ssh_stack, tools_path

pytestmark = [pytest.mark.component, pytest.mark.real_engine, pytest.mark.ssh_hosts, pytest.mark.s3]

PRE_COMPONENT = "fa6a7ed683ee9ea3337dad9a7135914630ad0e16"  # main before the component (the last such program)
API_KEY = "sk-compat-" + "5" * 20
S3_KEYS = ("compat-access-1", "compat-secret-" + "7" * 16)
DEPLOYMENT = "inferry:index:Deployment"
SERVICE = "pulumi-python:dynamic/inferry:SshService"
WEIGHTS = "pulumi-python:dynamic/inferry:SshWeights"


def checkout(commit: str, folder):
    """The program (infra/, templates/, __main__.py) as it was at commit."""
    folder.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "infra", "templates", "__main__.py"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def use_program(folder, code) -> None:
    """Point the program of the project in folder at the code in another folder."""
    for name in ("infra", "__main__.py"):
        link = folder / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(code / name)


def steps(project: Project, stack: str) -> list[tuple[str, str]]:
    """(op, type) of each step `pulumi preview --json` plans."""
    out = project.pulumi("preview", "--json", "--show-sames", "--stack", stack).stdout
    return [(s["op"], s["urn"].split("::")[2].rsplit("$", 1)[-1]) for s in json.loads(out)["steps"]]


def test_state_of_the_program_before_the_component_needs_no_replacement(host_network, s3_server_factory,
                                                                          tmp_path):
    server = model_store(s3_server_factory, host_network, S3_KEYS, tmp_path)
    (host,) = host_network.add_hosts(["compat1"])
    host.set_standin()
    folder = tmp_path / "project"
    folder.mkdir()
    use_program(folder, checkout(PRE_COMPONENT, tmp_path / "old"))
    # Typed `pulumi up` takes the interpreter from PATH (scripts/tools.sh: the language host): this venv's; the
    # program's code is the folder's infra/ either way, first on sys.path.
    path = f"{Path(sys.executable).parent}{os.pathsep}{tools_path()}"
    project = Project(folder, env={"PATH": path})  # links only what is not there yet: the program stays the old one
    deployment = ssh_stack([host], server)
    project.write_stack("compat", deployment, {"sshPrivateKey": host_network.client_key_text, "apiKey": API_KEY,
                                               "s3AccessKey": S3_KEYS[0], "s3SecretKey": S3_KEYS[1]})
    try:
        project.pulumi("up", "--yes", "--skip-preview", "--stack", "compat")
        before = project.export("compat")["deployment"]["resources"]
        assert not [r for r in before if r["type"] == DEPLOYMENT]  # the old program: no component
        starts = len(host.engine_starts())
        use_program(folder, ROOT)
        planned = steps(project, "compat")
        print("steps planned with the component:", planned)  # the evidence, with -s
        # Only the component is new; nothing of the old state is created, deleted or replaced. The engine service
        # and the weights may update in place: the rendered files (the engine's environment) and the weights'
        # keep_on_destroy changed since PRE_COMPONENT.
        assert [t for op, t in planned if op not in ("same", "update")] == [DEPLOYMENT], planned
        assert ("create", DEPLOYMENT) in planned and {t for op, t in planned if op == "update"} <= {SERVICE, WEIGHTS}
        olds = sorted(r["type"] for r in before if not r["type"].startswith("pulumi:providers:"))
        assert sorted(t for op, t in planned if op in ("same", "update")) == olds  # every old resource kept
        project.pulumi("up", "--yes", "--skip-preview", "--stack", "compat")
        after = {r["type"] + "::" + r["urn"].rsplit("::", 1)[-1]: r for r in
                 project.export("compat")["deployment"]["resources"]}
        for old in before:  # same resource (name, id), now under the component
            new = after[old["type"] + "::" + old["urn"].rsplit("::", 1)[-1]]
            assert new.get("id") == old.get("id")
        restarted = int(("update", SERVICE) in planned)  # at most the one restart its new files ask for
        assert len(after) == len(before) + 1 and len(host.engine_starts()) == starts + restarted
        children = [r for r in after.values() if r["type"].startswith(("inferry:", "pulumi-python"))]
        assert all(DEPLOYMENT in r["urn"] for r in children if r["type"] != DEPLOYMENT)
        assert [s for s in steps(project, "compat") if s[0] != "same"] == []  # and then nothing to do
    finally:
        project.pulumi("destroy", "--yes", "--stack", "compat", check=False)
        host_network.remove_host(host)

