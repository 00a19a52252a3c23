"""One SSH session's commands against a real OpenSSH server: sent without Nagle's delay, output read whole from
both streams, and a command that ends without reading its input judged by its exit status."""
from __future__ import annotations

import hashlib
import socket

import pytest

from infra.errors import ConnectionLost, RemoteError
from infra.targets.ssh import pool
from infra.targets.ssh.files import parse_state, state_command
from infra.targets.ssh.session import Conn, Session


@pytest.fixture
def session(make_hosts, host_network):
    """An open session to a fresh test host."""
    (h,) = make_hosts(1)
    pool.close_all()
    s = pool.session(Conn(address=h.address, port=h.port, user=h.user, name=h.name, host_key=h.host_key_line),
                     host_network.client_key_text)
    yield s
    pool.close_all()


def test_the_socket_sends_small_messages_at_once(session: Session):
    # Each command is a few small messages; under Nagle each waited for the server's delayed ACK (~40 ms).
    assert session._t.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1


def test_both_streams_are_read_whole_and_a_late_answer_is_waited_for(session: Session):
    res = session.run("head -c 300000 /dev/zero | tr '\\0' a; head -c 200000 /dev/zero | tr '\\0' b >&2; "
                      "sleep 0.3; echo done", "big output")
    assert res.code == 0
    assert res.out == "a" * 300000 + "done\n" and res.err == "b" * 200000


def test_a_command_that_ignores_its_input_is_judged_by_its_exit_status(session: Session):
    # 4 MiB is more than the channel's window: the command has exited while the input is still being sent.
    res = session.run("exit 3", "ignore input", stdin=b"x" * (4 << 20), check=False)
    assert res.code == 3
    assert session.run("cat | wc -c", "read input", stdin=b"y" * (4 << 20)).out.strip() == str(4 << 20)


def _conn(h) -> Conn:
    return Conn(address=h.address, port=h.port, user=h.user, name=h.name, host_key=h.host_key_line)


def test_a_read_the_connection_drops_under_is_asked_again_on_a_new_connection(make_hosts, host_network):
    (h,) = make_hosts(1)
    key = host_network.client_key_text
    pool.close_all()
    first = pool.session(_conn(h), key)
    h.drop_connections_on("sha256sum")
    res = pool.read(_conn(h), key, lambda s: s.run("echo x | sha256sum", "read a digest"))
    assert res.out == hashlib.sha256(b"x\n").hexdigest() + "  -\n"
    assert not first.alive and h.fired("sha256sum")  # it did drop: the fault fired
    pool.close_all()


def test_a_step_that_changes_the_host_is_never_asked_again(make_hosts, host_network):
    (h,) = make_hosts(1)
    pool.close_all()
    h.drop_connections_on("sha256sum")
    with pytest.raises(ConnectionLost, match="append a line: the SSH connection was lost") as e:
        pool.session(_conn(h), host_network.client_key_text).run("echo x >> /root/once; sha256sum /root/once",
                                                                 "append a line")
    assert "apply again" in e.value.fix
    assert h.path("/root/once").read_text() == "x\n"
    pool.close_all()


def test_a_file_the_host_cannot_hash_fails_the_read_instead_of_reading_as_missing(session: Session):
    # Read as missing, it was reported as drift ('... missing') while the file was there all along.
    session.run("mkdir -p /root/st && echo a > /root/st/a && echo b > /root/st/b", "files")
    paths = ["/root/st/a", "/root/st/b", "/root/st/absent"]
    digest = hashlib.sha256(b"b\n").hexdigest()
    assert parse_state(session.run(state_command(paths), "read").out)["/root/st/b"] == (0o644, digest)
    assert set(parse_state(session.run(state_command(paths), "read").out)) == {"/root/st/a", "/root/st/b"}
    session.run("mkdir -p /usr/local/bin && printf '#!/bin/sh\\necho \"sha256sum: $1: Input/output error\" >&2; "
                "exit 1\\n' > /usr/local/bin/sha256sum && chmod +x /usr/local/bin/sha256sum", "a failing disk")
    try:
        with pytest.raises(RemoteError, match=r"read failed \(exit 3\): sha256sum: /root/st/a: Input/output error"):
            session.run(state_command(paths), "read")
    finally:
        session.run("rm -f /usr/local/bin/sha256sum", "clean up")
