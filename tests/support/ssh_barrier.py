"""A witness of concurrency kept on the hosts' side: each host's first health check waits for every host's.

A `curl` wrapper in each test host's /usr/local/bin: the first request to an engine's `/health` URL (on loopback, or its private address behind a
gateway) marks the host
as arrived in a folder every host sees, waits until all hosts have arrived (at most WAIT_S), then runs the real
curl and records when it started and ended (the host's clock: one machine). If the health checks overlapped,
every start precedes every end; if hosts ran one after another the first one waits alone, ends, and only then
does the next begin. Other curl calls (weight downloads, later health polls) pass straight through.
"""
from __future__ import annotations

import shutil
import uuid

from tests.support.hosts.host import SHARED

WAIT_S = 15


class HealthBarrier:
    """Install on hosts (`with HealthBarrier(hosts) as b:`), run something, then read what the hosts recorded."""

    def __init__(self, hosts: list) -> None:
        self.hosts = hosts
        # The run's shared folder (tests/support/hosts/host.py SHARED): the one every host and this machine see.
        name = f"barrier-{uuid.uuid4().hex}"
        self.folder, self.on_hosts = hosts[0].shared_dir / name, f"{SHARED}/{name}"
        self.folder.mkdir()
        self.folder.chmod(0o777)

    def install(self) -> "HealthBarrier":
        """Wrap curl on every host (replacing an earlier barrier's wrapper)."""
        real = shutil.which("curl", path="/usr/sbin:/usr/bin:/sbin:/bin")
        d, n = self.on_hosts, len(self.hosts)
        for h in self.hosts:
            log, me = f"{d}/{h.name}.log", f"{d}/arrived-{h.name}"
            first = (f'echo "start $(date +%s.%N)" >> {log}; touch {me}; i=0; '
                     f"while [ \"$(ls {d} | grep -c '^arrived-')\" -lt {n} ] && [ $i -lt {WAIT_S * 20} ]; "
                     f'do sleep 0.05; i=$((i+1)); done; {real} "$@"; rc=$?; echo "end $(date +%s.%N)" >> {log}; exit $rc')
            h.install("curl", f'case "$*" in *http://*:*/health*) [ -e {me} ] || {{ {first}; }};; esac\n'
                              f'exec {real} "$@"')
        return self

    def __enter__(self) -> "HealthBarrier":
        return self.install()

    def __exit__(self, *exc) -> None:
        self.remove()

    def remove(self) -> None:
        """Take the wrappers off and forget the records."""
        for h in self.hosts:
            (h.root / "bin" / "curl").unlink(missing_ok=True)
        shutil.rmtree(self.folder, ignore_errors=True)

    def spans(self) -> dict[str, tuple[float, float]]:
        """{host: (start, end)} of each host's first health check, as the host recorded it."""
        found = {}
        for h in self.hosts:
            log = self.folder / f"{h.name}.log"
            marks = dict(ln.split() for ln in log.read_text().splitlines()) if log.exists() else {}
            found[h.name] = (float(marks["start"]), float(marks["end"])) if len(marks) == 2 else None
        return found

    def all_at_once(self) -> bool:
        """Every host's first health check had begun before any of them ended."""
        spans = self.spans()
        if None in spans.values():
            return False
        return max(s for s, _ in spans.values()) < min(e for _, e in spans.values())
