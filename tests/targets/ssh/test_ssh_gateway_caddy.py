"""A gateway host with Caddy's standard build (as its apt package installs it) cannot run the limits: the apply
stops at preflight, before any change, naming the field and both ways on; each way then serves (the printed fix,
tested). Real hosts over SSH, the real Caddy builds (scripts/tools.sh: inferry's and the standard one)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from infra.errors import RemoteError
from tests.support.realengine import TOOLS_BIN
from tests.support.ssh_env import API_KEY, MODEL, apply, deployment, ops_log, weights_store  # noqa: F401
from tests.support.wheel import run

pytestmark = pytest.mark.gateway
PORT = 8080


def _use_caddy(host, build: Path) -> None:
    """Put one Caddy build at the host's /usr/local/bin/caddy (where the host's install step finds Caddy)."""
    dest = host.root / "bin" / "caddy"
    dest.unlink(missing_ok=True)
    try:
        os.link(build, dest)
    except OSError:
        shutil.copy2(build, dest)


def _build_as_printed(installed, work: Path) -> Path:
    """inferry's Caddy as the error says to build it: the installed package's `inferry gateway build-caddy`."""
    _, bin_dir = installed
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    r = run(bin_dir / "inferry", "gateway", "build-caddy", "--arch", "amd64", "-o", "gw/caddy", cwd=work, env=env)
    assert r.returncode == 0 and "install -m 755" in r.stdout, r.stderr
    return work / "gw" / "caddy"


def _chat_status(host) -> int:
    out = host.exec(f"curl -s -o /dev/null -w '%{{http_code}}' -m 20 -H 'Authorization: Bearer {API_KEY}' "
                    f"http://127.0.0.1:{PORT}/v1/models", timeout=40).stdout
    return int(out or 0)


def test_the_standard_caddy_stops_the_apply_before_any_change_and_each_printed_way_serves(make_hosts, weights_store,
                                                                                          installed, tmp_path):
    (h,) = make_hosts(1)
    _use_caddy(h, TOOLS_BIN / "caddy-standard")
    gateway = {"tls": "off", "http_port": PORT}
    with pytest.raises(RemoteError) as e:
        apply(deployment([h], weights_store, gateway=gateway), [h], weights_store)
    text = e.value.render()
    assert "target.gateway.limits" in text and "Caddy's standard build" in text and f"host {h.name}" in text
    assert "limits.enabled: false" in text
    assert "`inferry gateway build-caddy --arch amd64`" in text
    assert ops_log(h) == [] and h.engine_starts() == []  # stopped before the weights, the engine or the gateway
    # Way one: serve without limits on the standard build.
    apply(deployment([h], weights_store, gateway={**gateway, "limits": {"enabled": False}}), [h], weights_store)
    assert _chat_status(h) == 200
    # Way two: inferry's build installed while the standard one runs (a reload would not load it), limits on.
    _use_caddy(h, _build_as_printed(installed, tmp_path))
    apply(deployment([h], weights_store, gateway=gateway), [h], weights_store)
    assert _chat_status(h) == 200
    exe = h.exec("readlink /proc/$(cat /etc/inferry/gateway/caddy.pid)/exe").stdout.strip()
    assert exe == "/usr/local/bin/caddy"  # the process runs the installed build, not the one replaced
    assert "inferry_limits" in h.exec("cat /etc/inferry/gateway/caddy.json").stdout


def test_a_folder_the_gateways_user_cannot_reach_is_named_and_the_printed_fix_serves(make_hosts, weights_store):
    """Caddy runs as its own user: a service_dir under a folder closed to other users is named with its fix."""
    (h,) = make_hosts(1)
    _use_caddy(h, TOOLS_BIN / "caddy")
    h.exec("mkdir -p /srv/closed && chmod 700 /srv/closed", check=True)
    d = deployment([h], weights_store, gateway={"tls": "off", "http_port": PORT}, service_dir="/srv/closed/inferry")
    with pytest.raises(RemoteError) as e:
        apply(d, [h], weights_store)
    text = e.value.render()
    assert "inferry-gateway cannot reach /srv/closed/inferry/gateway" in text and f"host {h.name}" in text
    assert "(chmod o+x)" in text and "Traceback" not in text
    h.exec("chmod o+x /srv/closed", check=True)  # the printed fix
    apply(d, [h], weights_store)
    assert _chat_status(h) == 200
