"""HostNetwork: this run's private /24 with a bridge, a test client key, and the hosts on it."""
from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.support.hosts import netns
from tests.support.hosts.files import copy_tools, keygen
from tests.support.hosts.host import SSHD, HostOptions, TestHost
from tests.support.hosts.image import standin_image

TOOLS = ("ip", "nsenter", "unshare", "mount", "ssh-keygen")


def preflight() -> None:
    """Fail with the fix when this machine cannot make test hosts (no skips: the suite needs them)."""
    missing = [t for t in TOOLS if shutil.which(t) is None] + ([] if os.path.exists(SSHD) else [SSHD])
    if os.geteuid() != 0 or missing:
        why = f"missing {', '.join(missing)}" if missing else "not running as root"
        raise RuntimeError(f"SSH test hosts need root, OpenSSH server, iproute2 and util-linux ({why}); "
                           "run `sudo scripts/setup.sh --test` and the tests as root")


class HostNetwork:
    """A bridge with a private /24 in the root namespace; add_host() puts real sshd hosts on it."""

    def __init__(self) -> None:
        preflight()
        self.slot = netns.claim_slot()
        self.client_key_path: Path = self.slot.dir / "client_ed25519"
        self.client_public_line = keygen(self.client_key_path)
        self.standin = copy_tools(self.slot.dir / "tools")
        self.hosts: dict[str, TestHost] = {}
        self._next_index = 2

    @property
    def bridge(self) -> str:
        """Bridge interface name."""
        return self.slot.bridge

    @property
    def subnet(self) -> str:
        """The private /24, e.g. '10.213.1.0/24'."""
        return self.slot.subnet

    @property
    def gateway(self) -> str:
        """The bridge's address: bind servers the hosts must reach (S3, ...) here, not 127.0.0.1."""
        return self.slot.gateway

    @property
    def client_key_text(self) -> str:
        """The test client's private key text, authorised on every host."""
        return self.client_key_path.read_text()

    def _free_index(self, reserved: set[int]) -> int:
        """Next unused address, round-robin: a reused address would meet stale ARP entries."""
        used = {h.index for h in self.hosts.values()} | reserved
        for step in range(253):
            index = 2 + (self._next_index - 2 + step) % 253
            if index not in used:
                self._next_index = index + 1
                reserved.add(index)
                return index
        raise RuntimeError(f"no address left in {self.subnet}")

    def add_host(self, name: str, gpu: str = "h200", gpu_count: int = 1,
                 weights_cache_size: str | int | None = None, **kw) -> TestHost:
        """Boot a host named name (GPU kind 'h200'|'h100', count, optional tmpfs size for the weights cache)."""
        return self.add_hosts([name], gpu=gpu, gpu_count=gpu_count, weights_cache_size=weights_cache_size, **kw)[0]

    def add_hosts(self, names: list[str], **kw) -> list[TestHost]:
        """Boot several hosts at once (in parallel: each boot mostly waits on processes)."""
        clash = [n for n in names if n in self.hosts]
        if clash or len(set(names)) != len(names):
            raise ValueError(f"host names already used or repeated: {clash or names}")
        options = HostOptions(**kw)
        reserved: set[int] = set()
        indexes = [self._free_index(reserved) for _ in names]
        image = self.engine_image() if options.docker else None
        with ThreadPoolExecutor(max_workers=8) as pool:
            futures = [pool.submit(TestHost, self.slot, name, index, self.client_key_path, options, self.standin,
                                   image) for name, index in zip(names, indexes)]
        hosts = [f.result() for f in futures if f.exception() is None]
        failed = [f.exception() for f in futures if f.exception() is not None]
        if failed:
            for host in hosts:
                host.close()
            raise failed[0]
        self.hosts.update((h.name, h) for h in hosts)
        return hosts

    def engine_image(self) -> str:
        """The stand-in engine image's tarball where hosts can read it (built or taken from the cache)."""
        target = self.slot.dir / "tools" / "engine-image.tar"
        if not target.exists():
            shutil.copy(standin_image(), f"{target}.tmp")
            os.replace(f"{target}.tmp", target)
        return str(target)

    def remove_host(self, host: TestHost) -> None:
        """Tear one host down (processes, namespace, veth, folder)."""
        self.hosts.pop(host.name, None)
        host.close()

    def close(self) -> None:
        """Tear down every host, the bridge and the run's state."""
        for host in list(self.hosts.values()):
            self.remove_host(host)
        netns.release_slot(self.slot)

    def __enter__(self) -> HostNetwork:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
