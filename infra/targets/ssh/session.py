"""The paramiko layer: verified, key-authenticated SSH sessions whose every failure is a RemoteError."""
from __future__ import annotations

import io
import select
import shlex
import socket
import time
import uuid
import dataclasses
from dataclasses import dataclass

import paramiko

from infra.errors import ConnectionLost, RemoteError, Unreachable
from infra.targets.ssh.hostkeys import HostKeyPolicy, algorithms, known_types, none_offered, verify

CONNECT_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class Conn:
    """A host's connection settings as provider inputs carry them (the private key travels separately, secret)."""

    address: str
    port: int = 22
    user: str = "root"
    name: str = ""
    host_key: str | None = None  # pinned 'TYPE BASE64'
    known_hosts: str | None = None
    trust_on_first_use: bool = False

    @classmethod
    def from_dict(cls, d: dict) -> "Conn":
        """From provider inputs (numbers may arrive as floats)."""
        return cls(str(d["address"]), int(d.get("port", 22)), str(d.get("user", "root")), str(d.get("name") or ""),
                   d.get("host_key") or None, d.get("known_hosts") or None, bool(d.get("trust_on_first_use", False)))

    def to_dict(self) -> dict:
        """For provider inputs."""
        return dataclasses.asdict(self)

    @property
    def policy(self) -> HostKeyPolicy:
        """How the host's key is trusted."""
        return HostKeyPolicy(self.host_key, self.known_hosts, self.trust_on_first_use)

    @property
    def label(self) -> str:
        """The host as messages name it."""
        return self.name or self.address


@dataclass(frozen=True)
class Result:
    """What a remote command printed and how it exited."""

    code: int
    out: str
    err: str


def load_key(text: str, where: str) -> paramiko.PKey:
    """A private key from its text (OpenSSH or PEM; ed25519, ECDSA or RSA)."""
    for cls in (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey):
        try:
            return cls.from_private_key(io.StringIO(text))
        except (paramiko.SSHException, ValueError, TypeError, IndexError):
            continue
    raise RemoteError("the SSH private key could not be read (expected an unencrypted OpenSSH or PEM key)",
                      "store the key text with `pulumi config set --secret inferry:sshPrivateKey < KEYFILE`",
                      where=where)


class Session:
    """One authenticated SSH connection: run commands, write files atomically."""

    def __init__(self, conn: Conn, transport: paramiko.Transport):
        self.conn = conn
        self._t = transport

    @property
    def alive(self) -> bool:
        """Whether the connection is still up."""
        return self._t.is_active()

    @property
    def sudo(self) -> str:
        """The prefix that runs a command as root ('' when logged in as root)."""
        return "" if self.conn.user == "root" else "sudo -n "

    def _fail(self, step: str, e: BaseException, fix: str) -> RemoteError:
        # Only a connection that is gone is ConnectionLost (a read may ask again); a command that timed out or a
        # channel the server refused on a live connection would fail the same way a second time.
        kind = ConnectionLost if self._lost() else Unreachable
        return kind(f"{step} failed: {type(e).__name__}: {e}", fix, where=f"host {self.conn.label}")

    def _lost(self, wait_s: float = 1.0) -> bool:
        """Whether the connection closed (a command killed by a signal also ends with no exit status)."""
        deadline = time.monotonic() + wait_s
        while self._t.is_active() and time.monotonic() < deadline:
            time.sleep(0.05)
        return not self._t.is_active()

    def run(self, cmd: str, step: str, *, stdin: str | bytes = "", check: bool = True, timeout: float = 600) -> Result:
        """Run a shell command (as root); a non-zero exit raises RemoteError unless check is False."""
        full = f"{self.sudo}sh -c {shlex.quote(cmd)}"
        try:
            chan = self._t.open_session(timeout=CONNECT_TIMEOUT_S)
            chan.settimeout(timeout)
            chan.exec_command(full)
            if stdin:
                _send(chan, stdin.encode() if isinstance(stdin, str) else stdin)
            if not chan.closed:
                chan.shutdown_write()
            out, err = _drain(chan)
            code = chan.recv_exit_status()
            chan.close()
        except (OSError, EOFError, paramiko.SSHException) as e:
            raise self._fail(step, e, "check that the host is up and sshd is running, then apply again") from None
        if code == -1 and self._lost():  # no exit status, and the connection is gone: sshd died mid-command
            raise ConnectionLost(f"{step}: the SSH connection was lost before the command finished",
                                 "check that the host is up and sshd is running, then apply again",
                                 where=f"host {self.conn.label}")
        res = Result(code, out.decode(errors="replace"), err.decode(errors="replace"))
        if check and code != 0:
            tail = (res.err.strip() or res.out.strip())[-1500:]
            raise RemoteError(f"{step} failed (exit {code}): {tail}",
                              "fix the cause shown above on the host, then apply again",
                              where=f"host {self.conn.label}")
        return res

    def put(self, path: str, data: bytes, mode: int, step: str) -> None:
        """Write a file atomically and privately: a temporary file next to it, created 0600 (umask 077) before
        its first byte, then given its mode and renamed into place. The data travels on stdin; a connection lost
        mid-way ends cat's input as if it were complete, so only a temporary file of the full size is renamed."""
        tmp = shlex.quote(f"{path}.inferry-{uuid.uuid4().hex[:8]}")
        # set -C: the temporary file is made new (a link planted under its name is never followed).
        self.run(f"umask 077 && set -C && cat > {tmp} && [ \"$(wc -c < {tmp})\" -eq {len(data)} ] && chmod {mode:o} {tmp} "
                 f"&& mv -f {tmp} {shlex.quote(path)} "
                 f"|| {{ rc=$?; rm -f {tmp}; exit $rc; }}", step, stdin=data)

    def close(self) -> None:
        """Close the connection."""
        self._t.close()


def _send(chan: paramiko.Channel, data: bytes) -> None:
    """Write a command's input; a command that ended without reading it all is judged by its exit status."""
    try:
        chan.sendall(data)
    except OSError:
        if not chan.exit_status_ready():
            raise


def _drain(chan: paramiko.Channel) -> tuple[bytes, bytes]:
    """Read stdout and stderr together so neither fills its window and stalls the other. Sleeps in poll() on
    the channel until data, EOF or close arrives: a fleet holds one channel per host open through an engine's
    load (minutes), and polling each every few milliseconds cost more CPU than the hosts' work."""
    out, err = bytearray(), bytearray()
    while True:
        if chan.recv_ready():
            out += chan.recv(65536)
        elif chan.recv_stderr_ready():
            err += chan.recv_stderr(65536)
        elif chan.exit_status_ready():
            # Closed streams: read what is left (recv returns b"" at EOF).
            while (chunk := chan.recv(65536)):
                out += chunk
            while (chunk := chan.recv_stderr(65536)):
                err += chunk
            return bytes(out), bytes(err)
        elif chan.eof_received:
            chan.status_event.wait(0.05)  # sshd sends EOF, then the exit status: the channel's pipe stays readable between
        else:
            _readable(chan, 1.0)


def _readable(chan: paramiko.Channel, timeout_s: float) -> None:
    """Wait until the channel has data, EOF or closed (poll, not select: a fleet's descriptors pass 1024)."""
    p = select.poll()
    p.register(chan.fileno(), select.POLLIN)
    p.poll(timeout_s * 1000)


def _prefer(t: paramiko.Transport, known: list[str]) -> None:
    """Negotiate only host-key types already trusted for a known host, as OpenSSH does: otherwise the server
    may show a key of another type, which verify() refuses."""
    if known:
        opts = t.get_security_options()
        opts.key_types = [k for k in opts.key_types if k in algorithms(known)] or list(opts.key_types)


def connect(ep: Conn, key: paramiko.PKey, step: str = "connect") -> Session:
    """Open, verify the host key, authenticate; every failure names the host, step and fix."""
    where = f"host {ep.label} ({ep.address}:{ep.port})"
    try:
        sock = socket.create_connection((ep.address, ep.port), timeout=CONNECT_TIMEOUT_S)
    except OSError as e:
        raise Unreachable(f"{step}: cannot reach {ep.address}:{ep.port}: {e.strerror or e}",
                          "check the address and port, that the host is up, sshd is running and no firewall "
                          "blocks the port", where=where) from None
    # Each command is a few small SSH messages (open, exec, data, EOF): with Nagle's algorithm on, the next waits
    # for the server's delayed ACK (40 ms on Linux), a stall on every command of every step.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t = paramiko.Transport(sock)
    try:
        known = known_types(ep.address, ep.port, ep.policy)
        _prefer(t, known)
        t.start_client(timeout=CONNECT_TIMEOUT_S)
        verify(ep.address, ep.port, t.get_remote_server_key(), ep.policy, where)
        t.auth_publickey(ep.user, key)
    except paramiko.AuthenticationException:
        t.close()
        raise RemoteError(f"{step}: the server refused key authentication for user {ep.user!r}",
                          f"add the public key to ~{ep.user}/.ssh/authorized_keys on the host, or fix target.hosts[].user",
                          where=where) from None
    except (OSError, EOFError, paramiko.SSHException) as e:
        t.close()
        if known and "no acceptable host key" in str(e):
            raise none_offered(ep.address, ep.port, ep.policy, known, where) from None
        raise Unreachable(f"{step}: SSH handshake failed: {type(e).__name__}: {e}",
                          "check that the port speaks SSH and sshd is healthy (see its log)", where=where) from None
    except RemoteError:
        t.close()
        raise
    return Session(ep, t)
