"""pytest fixtures for real OpenSSH test hosts (registered by tests/conftest.py via pytest_plugins).

- `host_network` (session): one HostNetwork per test process (xdist workers each get their own /24).
- `make_hosts(n, **kw)` (function): boot n hosts on it; they are torn down after the test.
- `ssh_connect(host)` helper: a paramiko client pinned to the host key, logged in with the client key.
"""
from __future__ import annotations

import base64
import itertools
from collections.abc import Callable, Iterator

import paramiko
import pytest

from tests.support.hosts.host import TestHost
from tests.support.hosts.network import HostNetwork

_names = itertools.count(1)


@pytest.fixture(scope="session")
def host_network() -> Iterator[HostNetwork]:
    """This test process's private network of SSH hosts; removed at the end of the session."""
    network = HostNetwork()
    try:
        yield network
    finally:
        network.close()


@pytest.fixture
def make_hosts(host_network: HostNetwork) -> Iterator[Callable[..., list[TestHost]]]:
    """Factory: make_hosts(n, gpu=..., gpu_count=..., weights_cache_size=..., prefix='h') -> [TestHost]."""
    made: list[TestHost] = []

    def make(n: int = 1, prefix: str = "h", **kw) -> list[TestHost]:
        hosts = host_network.add_hosts([f"{prefix}{next(_names)}" for _ in range(n)], **kw)
        made.extend(hosts)
        return hosts

    try:
        yield make
    finally:
        for host in made:
            host_network.remove_host(host)


def host_key(host: TestHost) -> paramiko.PKey:
    """The host's current public host key as a paramiko key object."""
    kind, data = host.host_key_line.split()
    return paramiko.PKey.from_type_string(kind, base64.b64decode(data))


def ssh_connect(host: TestHost, pinned: paramiko.PKey | None = None, timeout: float = 10) -> paramiko.SSHClient:
    """Connect as root with the client key, trusting only the pinned key (default: the current one)."""
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    key = pinned or host_key(host)
    client.get_host_keys().add(host.address, key.get_name(), key)
    client.connect(host.address, port=host.port, username=host.user, key_filename=str(host.client_key_path),
                   look_for_keys=False, allow_agent=False, timeout=timeout)
    return client
