"""The shared S3 test server: keys enforced, restart keeps the port, kill stops it."""
from __future__ import annotations

import botocore.exceptions
import pytest

from tests.support.servers.s3 import S3Server


def test_server_serves_buckets_and_enforces_keys(s3_server, tmp_path):
    s3_server.bucket("srv-check")
    client = s3_server.boto3_client()
    client.put_object(Bucket="srv-check", Key="a/b.txt", Body=b"hello")
    assert client.get_object(Bucket="srv-check", Key="a/b.txt")["Body"].read() == b"hello"
    wrong = S3Server(tmp_path, s3_server.access_key, "not-the-secret", port=s3_server.port)
    with pytest.raises(botocore.exceptions.ClientError):
        wrong.boto3_client().list_objects_v2(Bucket="srv-check")


def test_restart_keeps_port_and_data(s3_server_factory):
    server = s3_server_factory(access_key="other-access", secret_key="other-secret-key")
    server.bucket("keep")
    server.boto3_client().put_object(Bucket="keep", Key="k", Body=b"x")
    port = server.port
    server.kill()
    assert not server.running
    server.restart()
    assert server.port == port
    assert server.boto3_client().get_object(Bucket="keep", Key="k")["Body"].read() == b"x"
