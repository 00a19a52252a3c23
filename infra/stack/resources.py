"""Where inferry's own files are: templates and example stacks, in an installed package or in a checkout."""
from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # infra/
# The example stacks the package ships (pyproject.toml lists the same files as package data).
EXAMPLES = ("aws-k8s", "eu-ssh", "staging")


def bundled(folder: str) -> Path:
    """templates/ or stacks/: inside an installed package under infra/bundled/, in a checkout at its top."""
    installed = HERE / "bundled" / folder
    return installed if installed.is_dir() else HERE.parent / folder


def example_stack(name: str) -> Path | None:
    """The bundled example stack file of that name, if there is one."""
    path = bundled("stacks") / f"Pulumi.{name}.yaml"
    return path if name in EXAMPLES and path.is_file() else None
