"""Pytest fixtures for real servers: a session-wide S3 server and a factory for more."""
from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.support.servers.s3 import S3Server

ACCESS_KEY = "inferry-test-access"
SECRET_KEY = "inferry-test-secret-0123456789"


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory) -> Iterator[S3Server]:
    """One rclone S3 server on 127.0.0.1 for the whole session (keys ACCESS_KEY/SECRET_KEY)."""
    server = S3Server(tmp_path_factory.mktemp("s3") / "data", ACCESS_KEY, SECRET_KEY)
    with server:
        yield server


@pytest.fixture(scope="session")
def s3_server_factory(tmp_path_factory) -> Iterator[Callable[..., S3Server]]:
    """Start more servers: factory(access_key=..., secret_key=..., host=..., port=0) -> started S3Server."""
    started: list[S3Server] = []

    def make(access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY, host: str = "127.0.0.1",
             port: int = 0) -> S3Server:
        server = S3Server(tmp_path_factory.mktemp("s3x") / "data", access_key, secret_key, host, port)
        started.append(server.start())
        return server

    yield make
    for server in started:
        server.stop()
