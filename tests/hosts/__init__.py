"""Real OpenSSH test hosts in network namespaces: HostNetwork, TestHost and their pytest fixtures."""
from tests.hosts.host import HostOptions, TestHost
from tests.hosts.network import HostNetwork

__all__ = ["HostNetwork", "HostOptions", "TestHost"]
