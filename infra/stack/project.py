"""Where the project is: found as Pulumi finds it, from the current folder up to a Pulumi.yaml."""
from __future__ import annotations

from pathlib import Path


def project_root(start: Path | None = None) -> Path:
    """The project folder, found as Pulumi finds it: the nearest Pulumi.yaml from the current folder up;
    outside any project, the current folder (never the folder inferry was installed from)."""
    here = (start or Path.cwd()).resolve()
    return next((f for f in (here, *here.parents) if (f / "Pulumi.yaml").is_file()), here)


def in_project(start: Path | None = None) -> bool:
    """Whether a Pulumi.yaml lies in the current folder or above it."""
    return (project_root(start) / "Pulumi.yaml").is_file()
