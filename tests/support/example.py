"""An example program of examples/ run as a user runs it: its files in a project folder, typed `pulumi` there.

The stand-in cloud (tests/support/cloud) is importable from PYTHONPATH, as a provider package is; `inferry` is
the wheel of this tree, installed alone into the venv the example's Pulumi.yaml names (`.venv`), as a user's is.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import ROOT
from tests.support.realengine import Project

CLOUD = ROOT / "tests" / "support" / "cloud"


def example_env(**env: str) -> dict[str, str]:
    """The environment of a typed `pulumi` beside the user's own: the stand-in cloud importable."""
    return {"PYTHONPATH": str(CLOUD), **env}


class Example:
    """The example's files in a project folder of their own, its `.venv` the one the wheel went into (install:
    that venv's bin folder), the stand-in cloud importable."""

    def __init__(self, source: Path, folder: Path, install: Path, env: dict[str, str]):
        folder.mkdir()
        self.project = Project(folder, install, env)  # the CLI, backend and PULUMI_HOME
        for name in ("Pulumi.yaml", "__main__.py"):
            shutil.copy(source / name, folder / name)
        (folder / ".venv").symlink_to(install.parent)  # `python -m venv .venv`, then `pip install inferry` in it
        self.events = Path(env["MY_CLOUD_EVENTS"])

    def pulumi(self, *args: str, **kw):
        """`pulumi ARGS --stack dev` in the example's folder."""
        return self.project.pulumi(*args, "--stack", "dev", **kw)

    def config(self, values: dict[str, str], secret: bool = False) -> None:
        for key, value in values.items():
            self.pulumi("config", "set", *(["--secret"] if secret else []), key, stdin=value)

    def run(self, command: str, *args: str) -> list[tuple[str, str, str]]:
        """`pulumi up|destroy` as typed (--json: its engine events); (op, type, name) of each finished step."""
        r = self.pulumi(command, "--yes", "--skip-preview", "--json", *args, check=False)
        assert r.returncode == 0, f"pulumi {command} exited {r.returncode}:\n{diagnostics(r.stdout)}{r.stderr}"
        return steps(r.stdout)

    def output(self, name: str) -> str:
        return json.loads(self.pulumi("stack", "output", "--json").stdout)[name]

    def state(self, name: str) -> dict:
        return self.project.resources("dev")[name]["outputs"]

    def cloud_events(self) -> list[dict]:
        """The stand-in cloud's calls, in order (one JSON object a line in MY_CLOUD_EVENTS)."""
        lines = self.events.read_text().splitlines() if self.events.exists() else []
        return [json.loads(line) for line in lines]


def steps(events: str) -> list[tuple[str, str, str]]:
    """The finished steps among a command's engine events, one JSON object a line (same steps included)."""
    found = []
    for line in events.splitlines():
        meta = json.loads(line).get("resOutputsEvent", {}).get("metadata")
        if meta:
            found.append((meta["op"], meta["type"], meta["urn"].rsplit("::", 1)[-1]))
    return found


def diagnostics(events: str) -> str:
    """The messages a failed command printed (its events' diagnostics, debug left out)."""
    found = [json.loads(line).get("diagnosticEvent") for line in events.splitlines() if line.startswith("{")]
    return "".join(d["prefix"] + d["message"] for d in found if d and d["severity"] != "debug")


def first(found: list[tuple[str, str, str]], op: str, typ: str) -> int:
    """The index of the first step of op on a resource of type typ."""
    return next(i for i, (o, t, _) in enumerate(found) if o == op and t == typ)
