"""The user's folder as a Pulumi project: what `inferry init` writes so that `inferry up` and a typed
`pulumi up` run the same program on the same stack files and state."""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from infra.errors import InferryError
from infra.lifecycle.pulumicli import STATE_DIR, logged_in

PROGRAM = '''"""The Pulumi program of this project: `pulumi up --stack NAME` deploys stacks/Pulumi.NAME.yaml with inferry
(the same program `inferry up NAME` runs)."""
from infra.program import main

main()
'''


def project_yaml(root: Path, environ: Mapping[str, str], python: str = sys.prefix) -> str:
    """Pulumi.yaml for a project in root: stack files in stacks/, the program in __main__.py, and, unless a
    backend is already chosen (logged in, PULUMI_BACKEND_URL), the local state inferry uses as the backend, so
    a typed `pulumi` finds the same state without a `pulumi login` that would change every other project."""
    lines = ["# Made by `inferry init`. `inferry up NAME` and `pulumi up --stack NAME` (typed in this folder) run",
             "# the same program (__main__.py) on the same stack files (stacks/) and state.",
             "name: inferry", "runtime:", "  name: python"]
    venv = _venv_inside(root, python)
    if venv:  # the official language host runs the program with it; others take `python` from PATH
        lines += ["  options:", "    toolchain: pip", f"    virtualenv: {venv}"]
    lines += ["stackConfigDir: stacks", "description: LLM inference with inferry"]
    if not environ.get("PULUMI_BACKEND_URL") and not logged_in(environ):
        # Relative: Pulumi resolves it from the folder it runs in, which is this one.
        lines += ["backend:", f"  url: file://{STATE_DIR}"]
    return "\n".join(lines) + "\n"


def _venv_inside(root: Path, python: str) -> str | None:
    """The virtualenv inferry runs from, relative to root, when it lies inside root."""
    prefix = Path(python).resolve()
    if prefix == Path(sys.base_prefix).resolve():
        return None
    try:
        return prefix.relative_to(root.resolve()).as_posix()
    except ValueError:
        return None


def make_project(root: Path, environ: Mapping[str, str] | None = None) -> list[Path]:
    """Write Pulumi.yaml and __main__.py into root (a folder with no Pulumi.yaml); returns what it wrote.
    Nothing is overwritten: a __main__.py already there is left as it is (and said)."""
    environ = os.environ if environ is None else environ
    wrote = []
    for name, text in (("Pulumi.yaml", project_yaml(root, environ)), ("__main__.py", PROGRAM)):
        path = root / name
        try:
            with open(path, "x", encoding="utf-8") as fh:
                fh.write(text)
        except FileExistsError:
            continue
        except OSError as e:
            raise InferryError(f"cannot write {path}: {e.strerror}", "run inferry init in a folder you can write",
                               where=str(root)) from None
        wrote.append(path)
    if (root / "Pulumi.yaml") in wrote and "url: file://" in (root / "Pulumi.yaml").read_text():
        (root / STATE_DIR).mkdir(parents=True, exist_ok=True)
    return wrote
