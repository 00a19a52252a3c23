"""`inferry render --out DIR`: the folder writer; each target says which files it places and where (Target.placements)."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from infra.errors import InferryError

INDEX = "INDEX.json"  # written last; names every file of the render, so the next one can remove stale ones
MARK = "inferry render"


@dataclass(frozen=True)
class Placed:
    """One rendered file and where it goes: hosts (labels) and the path there, or the cluster."""

    name: str
    content: str
    mode: int
    hosts: tuple[str, ...]
    path: str

    def line(self, out_dir: Path) -> str:
        """'wrote DIR/compose.yaml (644) -> gpu-1, gpu-2:/etc/inferry/compose.yaml'."""
        return f"wrote {out_dir / self.name} ({self.mode:o}) -> {', '.join(self.hosts)}:{self.path}"


def _previous(out_dir: Path) -> set[str]:
    """The files an earlier render wrote here; InferryError when the folder holds files inferry did not write."""
    if not out_dir.exists():
        return set()
    if not out_dir.is_dir():
        raise InferryError(f"cannot write into {out_dir}: it is a file, not a folder",
                           "pass --out a folder that can be created and written", where="--out")
    present = {p.name for p in out_dir.iterdir()}
    if not present:
        return set()
    try:
        index = json.loads((out_dir / INDEX).read_text(encoding="utf-8"))
        written = {str(f["file"]) for f in index["files"]} if index.get("rendered_by") == MARK else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        written = None
    if written is None:
        shown = ", ".join(sorted(present)[:5]) + (" ..." if len(present) > 5 else "")
        raise InferryError(f"{out_dir} holds files inferry render did not write ({shown}): it would mix them with "
                           "the render", "pass --out a new or empty folder", where="--out")
    return {n for n in written if n in present and "/" not in n and n not in (".", "..", INDEX)}


def write_render(out_dir: Path, stack_name: str, target: str, placed: list[Placed]) -> list[str]:
    """Write the files and INDEX.json; remove what an earlier render wrote that this one does not. Printed lines."""
    stale = _previous(out_dir) - {p.name for p in placed}
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for p in placed:
            path = out_dir / p.name
            path.write_text(p.content, encoding="utf-8")
            os.chmod(path, p.mode)
        for name in sorted(stale):
            (out_dir / name).unlink()
        index = {"rendered_by": MARK, "stack": stack_name, "target": target,
                 "files": [{"file": p.name, "hosts": list(p.hosts), "path": p.path, "mode": f"{p.mode:04o}"}
                           for p in placed]}
        (out_dir / INDEX).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    except OSError as e:
        raise InferryError(f"cannot write {e.filename or out_dir}: {e.strerror}",
                           "pass --out a folder that can be created and written (not a file)", where="--out") from None
    return ([p.line(out_dir) for p in placed] + [f"removed {out_dir / n} (an earlier render's)" for n in sorted(stale)]
            + [f"wrote {out_dir / INDEX} (where each file goes)"])
