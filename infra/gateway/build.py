"""inferry's Caddy build (Caddy's standard modules plus the limits module) from the sources the package ships,
built with the local Go toolchain for a gateway host's architecture."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from infra.errors import InferryError
from infra.stack.resources import bundled

GO_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}  # `uname -m` -> GOARCH
ARCHES = tuple(sorted(set(GO_ARCH.values())))
# What Go reads from the sources: everything else in the folder (tests, the Dockerfile) stays behind.
SOURCES = ("go.mod", "go.sum", "main.go", "limits/limits.go", "limits/zone.go")


def caddy_version(src: Path) -> str:
    """The Caddy release the build in SRC pins (its go.mod's require line)."""
    for line in (src / "go.mod").read_text().splitlines():
        parts = line.split()
        if parts[:2] == ["require", "github.com/caddyserver/caddy/v2"]:
            return parts[2]
    raise InferryError("caddy/go.mod names no Caddy release", "reinstall inferry: its package is incomplete")


def build_caddy(output: Path, arch: str = "amd64") -> str:
    """Build inferry's Caddy for linux/ARCH at OUTPUT (replaced whole, never half-written); returns its version."""
    if arch not in ARCHES:
        raise InferryError(f"--arch {arch!r} is not one inferry builds", f"use one of: {', '.join(ARCHES)}")
    go = shutil.which("go")
    if go is None:
        raise InferryError("building inferry's Caddy needs Go, and `go` is not on PATH",
                           "install Go (https://go.dev/dl; an older release fetches the one the build needs), or run "
                           "this on a machine that has it (--arch names the gateway host's CPU) and copy the binary")
    src = bundled("caddy")
    version = caddy_version(src)
    output = output.resolve()
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="inferry-caddy-") as tmp:
        # A copy: the installed package may be read-only, and Go must not write into it.
        for name in SOURCES:
            (Path(tmp) / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / name, Path(tmp) / name)
        partial = Path(tmp) / "caddy"
        env = {**os.environ, "CGO_ENABLED": "0", "GOOS": "linux", "GOARCH": arch, "GOFLAGS": "-buildvcs=false"}
        flags = f"-s -w -X github.com/caddyserver/caddy/v2.CustomVersion={version}-inferry"
        r = subprocess.run([go, "build", "-trimpath", "-ldflags", flags, "-o", str(partial), "."], cwd=tmp, env=env,
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise InferryError(f"go build failed:\n{r.stderr.strip()[-2000:]}",
                               "Go fetches Caddy's modules from its module proxy: check the network (GOPROXY), "
                               "then run the command again")
        tmp_out = output.with_name(f".{output.name}.partial")
        try:
            shutil.copyfile(partial, tmp_out)
            tmp_out.chmod(0o755)
            os.replace(tmp_out, output)
        finally:  # an interrupted copy leaves no partial file beside the output
            tmp_out.unlink(missing_ok=True)
    return f"{version}-inferry"
