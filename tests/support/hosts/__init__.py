"""Real OpenSSH test hosts in network namespaces: HostNetwork, TestHost and their pytest fixtures."""
from tests.support.hosts.host import HostOptions, TestHost
from tests.support.hosts.network import HostNetwork

__all__ = ["HostNetwork", "HostOptions", "TestHost"]
