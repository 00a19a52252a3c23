"""The suite's own SSH test hosts: reachable, pinned, isolated, and breakable on purpose."""
from __future__ import annotations

import hashlib
import time

import paramiko
import pytest

from tests.support.hosts.fixtures import host_key, ssh_connect

PRIVATE_PATHS = ("/root/marker", "/tmp/marker", "/etc/inferry-marker", "/var/lib/inferry/marker",
                 "/run/inferry/marker", "/var/run/marker2", "/opt/inferry/marker", "/usr/local/bin/marker",
                 "/dev/shm/marker", "/home/marker")


@pytest.fixture(scope="module")
def pair(host_network):
    """Two hosts shared by this module's read-mostly tests."""
    hosts = [host_network.add_host(f"pair{i}") for i in (1, 2)]
    yield hosts
    for host in hosts:
        host_network.remove_host(host)


def run(client: paramiko.SSHClient, cmd: str) -> tuple[int, str]:
    """Run cmd over SSH; return (exit status, stdout)."""
    _, out, _ = client.exec_command(cmd)
    text = out.read().decode()
    return out.channel.recv_exit_status(), text


def test_hosts_answer_ssh_with_client_key_and_pinned_host_key(pair):
    for host in pair:
        with ssh_connect(host) as client:
            assert run(client, "hostname") == (0, f"{host.name}\n")
            assert run(client, "echo $HOME; id -u") == (0, "/root\n0\n")


def test_hosts_are_on_the_network_private_subnet(host_network, pair):
    assert pair[0].address != pair[1].address
    for host in pair:
        assert host.address.rsplit(".", 1)[0] == host_network.gateway.rsplit(".", 1)[0]
    status, _ = run(ssh_connect(pair[0]), f"bash -c '</dev/tcp/{pair[1].address}/22'")
    assert status == 0


def test_a_file_written_on_one_host_is_absent_on_the_other(pair):
    a, b = pair
    with ssh_connect(a) as client:
        for path in PRIVATE_PATHS:
            assert run(client, f"mkdir -p $(dirname {path}) && echo {a.name} > {path}")[0] == 0
    for path in PRIVATE_PATHS:
        assert a.exec(f"cat {path}").stdout == f"{a.name}\n"
        if not path.startswith("/var/run/"):  # path() cannot follow the host's absolute symlinks
            assert a.path(path).read_text() == f"{a.name}\n"
        assert b.exec(f"test -e {path}").returncode == 1
    assert not (pair[0].root.parent / "marker").exists()
    assert a.exec(f"test -e {b.root}").returncode == 1  # the other host's sshd files and overlays too


def test_tools_on_the_host_are_its_own_and_the_basics_work(pair):
    # A host runs no Docker engine unless asked (docker=True): true whether this machine has Docker or not.
    out = pair[1].exec("ls /usr/local/bin; docker version >/dev/null 2>&1 || echo no-docker-engine; ls -A /root | wc -l; "
                       "echo hi | sha256sum; python3 -c 'print(6*7)'; curl --version | head -c 4")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["caddy", "nvidia-smi", "python3", "trtllm-serve", "vllm", "no-docker-engine", "0",
                                  "98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4", "-", "42",
                                  "curl"]


def test_hosts_see_only_their_own_processes(pair):
    a, b = pair
    a.exec("sleep 60 >/dev/null 2>&1 &")
    assert "sleep 60" in a.exec("ps ax -o args").stdout
    assert "sleep 60" not in b.exec("ps ax -o args").stdout


def test_hosts_reach_servers_bound_on_the_gateway(host_network, pair):
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer((host_network.gateway, 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        out = pair[1].exec(f"curl -s -o /dev/null -w '%{{http_code}}' http://{host_network.gateway}:"
                           f"{server.server_address[1]}/")
        assert out.stdout == "200"
    finally:
        server.shutdown()


def test_weights_cache_is_a_small_tmpfs_when_asked(make_hosts):
    (host,) = make_hosts(1, weights_cache_size="4M")
    assert host.exec("head -c 3000000 /dev/zero > /var/lib/inferry/weights/a").returncode == 0
    full = host.exec("head -c 3000000 /dev/zero > /var/lib/inferry/weights/b")
    assert full.returncode != 0 and "No space left on device" in full.stderr


def test_killed_sshd_drops_sessions_and_refuses_until_started(make_hosts):
    (host,) = make_hosts(1)
    client = ssh_connect(host)
    host.kill_sshd()
    with pytest.raises((paramiko.SSHException, EOFError, OSError)):
        run(client, "true")
    with pytest.raises(paramiko.ssh_exception.NoValidConnectionsError):
        ssh_connect(host)
    host.start_sshd()
    assert run(ssh_connect(host), "echo back") == (0, "back\n")


def test_stopped_sshd_refuses_new_connections(make_hosts):
    (host,) = make_hosts(1)
    host.stop_sshd()
    with pytest.raises(paramiko.ssh_exception.NoValidConnectionsError):
        ssh_connect(host)
    host.start_sshd()
    assert run(ssh_connect(host), "echo ok")[0] == 0


def test_changed_host_key_is_detected_by_paramiko(make_hosts):
    (host,) = make_hosts(1)
    old = host_key(host)
    new_line = host.regenerate_host_key()
    assert new_line != f"{old.get_name()} {old.get_base64()}"
    with pytest.raises(paramiko.BadHostKeyException):
        ssh_connect(host, pinned=old)
    assert run(ssh_connect(host), "true")[0] == 0


def test_sftp_works(pair):
    with ssh_connect(pair[0]) as client, client.open_sftp() as sftp:
        with sftp.open("/root/uploaded", "w") as f:
            f.write("payload")
    assert pair[0].exec("cat /root/uploaded").stdout == "payload"


def test_closed_host_leaves_no_namespace(host_network):
    import subprocess

    host = host_network.add_host("ephemeral")
    ns, root = host.netns, host.root
    host_network.remove_host(host)
    assert ns not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not root.exists()


def test_leftovers_of_a_dead_run_are_removed_on_start():
    import subprocess

    from tests.support.hosts import netns

    n = next(i for i in range(254, 1, -1) if not netns._slot_in_use(i) and not netns.Slot(i).dir.exists())
    dead = netns.Slot(n)
    dead.dir.mkdir(parents=True)
    (dead.dir / "owner").write_text("1 0\n")  # pid 1 with another start time: a run that is gone
    netns.make_bridge(dead)
    netns.add_host_net(dead, 2, dead.netns("ghost"))
    claimed = netns.claim_slot()
    try:
        assert claimed.n != n
        assert dead.netns("ghost") not in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                                         text=True).stdout
        assert netns.ip("link", "show", dead.bridge, check=False).returncode != 0
        assert netns.ip("link", "show", dead.veth(2), check=False).returncode != 0
        assert not dead.dir.exists()
    finally:
        netns.release_slot(claimed)


def test_kill_sshd_on_a_command_drops_the_connection_running_it(make_hosts):
    (host,) = make_hosts(1)
    host.kill_sshd_on("sha256sum")
    client = ssh_connect(host)
    assert run(client, "echo before") == (0, "before\n")
    with pytest.raises((paramiko.SSHException, EOFError, OSError)):
        run(client, "echo x | sha256sum; sleep 5")
        run(client, "true")
    deadline = time.monotonic() + 10
    while host.sshd_listening() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not host.sshd_listening()
    host.start_sshd()
    digest = hashlib.sha256(b"x\n").hexdigest()
    assert run(ssh_connect(host), "echo x | sha256sum") == (0, f"{digest}  -\n")  # once: now the real one


def test_a_one_shot_fault_acts_once_and_every_run_started_with_it_runs_the_real_program(make_hosts):
    # Runs that start while the first one acts must not fail: a wrapper that removed itself was gone under a run
    # the kernel had started ('cannot open'), and that read's exit 0 lost a line.
    (host,) = make_hosts(1)
    host.once_on("sha256sum", "echo acted >> /root/acted; sleep 0.3")
    host.exec("for i in $(seq 20); do (echo x | sha256sum > /root/sum.$i 2>&1) & done; wait", check=True)
    digest = hashlib.sha256(b"x\n").hexdigest()
    assert [host.path(f"/root/sum.{i}").read_text() for i in range(1, 21)] == [f"{digest}  -\n"] * 20
    assert host.path("/root/acted").read_text() == "acted\n" and host.fired("sha256sum")
    host.unwrap("sha256sum")
    assert not host.fired("sha256sum") and not host.path("/usr/local/bin/sha256sum").exists()
