"""Host-key trust: a key pinned in the stack, a known_hosts file, or trust on first use (then recorded)."""
from __future__ import annotations

import base64
import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import paramiko

from infra.errors import RemoteError

_LOCK = threading.Lock()  # replicas connect in parallel; known_hosts appends must not interleave


@dataclass(frozen=True)
class HostKeyPolicy:
    """How a host's key is trusted: pinned ('TYPE BASE64'), known_hosts file, and whether TOFU is allowed."""

    pinned: str | None = None
    known_hosts: str | None = None
    trust_on_first_use: bool = False

    @property
    def known_hosts_path(self) -> Path:
        """The known_hosts file used (default ~/.ssh/known_hosts)."""
        return Path(os.path.expanduser(self.known_hosts or "~/.ssh/known_hosts"))


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH-style SHA256 fingerprint, as `ssh-keygen -lf` prints it."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


# The host-key algorithms that prove each key type; an RSA key signs with SHA-2 (RFC 8332) before SHA-1.
_ALGORITHMS = {"ssh-rsa": ("rsa-sha2-512", "rsa-sha2-256", "ssh-rsa")}


def known_types(address: str, port: int, policy: HostKeyPolicy) -> list[str]:
    """The key types already trusted for the host (the pinned one, or those in known_hosts); [] for a new host."""
    if policy.pinned:
        return [policy.pinned.split()[0]]
    known = _load(policy.known_hosts_path)
    entries = known.lookup(host_entry(address, port)) if known is not None else None
    return list(entries.keys()) if entries else []


def algorithms(types: list[str]) -> set[str]:
    """The host-key algorithms a handshake may use to verify keys of these types."""
    return {a for t in types for a in _ALGORITHMS.get(t, (t,))}


def host_entry(address: str, port: int) -> str:
    """The known_hosts name of a host: 'addr' on port 22, '[addr]:port' otherwise."""
    return address if port == 22 else f"[{address}]:{port}"


def key_line(key: paramiko.PKey) -> str:
    """'TYPE BASE64' of a public key, the form pinned in a stack."""
    return f"{key.get_name()} {key.get_base64()}"


def verify(address: str, port: int, key: paramiko.PKey, policy: HostKeyPolicy, where: str) -> None:
    """Accept the server's key or raise RemoteError saying why and how to fix it."""
    offered = key_line(key)
    if policy.pinned:
        if policy.pinned.split()[:2] != offered.split()[:2]:
            raise RemoteError(
                f"host key changed: the stack pins {policy.pinned.split()[0]} "
                f"{_fp_of_line(policy.pinned)} but the host offered {key.get_name()} {fingerprint(key)}; "
                "refusing to connect (possible man-in-the-middle, or the host was reinstalled)",
                "verify the new key out of band (ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub on the host), "
                "then update target.hosts[].host_key in the stack file", where=where)
        return
    name = host_entry(address, port)
    path = policy.known_hosts_path
    with _LOCK:
        known = _load(path)
        entries = known.lookup(name) if known is not None else None
        if entries:
            if key.get_name() in entries and entries[key.get_name()] == key:
                return
            # A known host never gets a new key recorded, of its own type or another: trust on first use
            # trusts the first use only (a man in the middle offers whatever type the client has not seen).
            new_type = key.get_name() not in entries
            raise RemoteError(
                f"host key changed: {path} has {'no ' + key.get_name() + ' key but ' if new_type else ''}"
                f"a different key for {name} ({', '.join(sorted(entries.keys()))}); the host offered "
                f"{key.get_name()} {fingerprint(key)}; refusing to connect", _forget_fix(name, path), where=where)
        if not policy.trust_on_first_use:
            raise RemoteError(
                f"unknown host key {key.get_name()} {fingerprint(key)}: {name} is not in {path}",
                f"pin it in target.hosts[].host_key ('{offered[:40]}...'), add it to {path} "
                "(ssh-keyscan after checking the fingerprint), or set target.trust_on_first_use: true",
                where=where)
        _record(path, name, offered)


def none_offered(address: str, port: int, policy: HostKeyPolicy, known: list[str], where: str) -> RemoteError:
    """The refusal when a host offers none of the key types trusted for it (a new host key, or a new server)."""
    fix = ("verify the host's key out of band (ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub on the host), then "
           "update target.hosts[].host_key in the stack file") if policy.pinned else \
        _forget_fix(host_entry(address, port), policy.known_hosts_path)
    return RemoteError(f"host key changed: the host offers none of the key types trusted for it ({', '.join(known)});"
                       " refusing to connect (possible man-in-the-middle, or the host was reinstalled)", fix,
                       where=where)


def _forget_fix(name: str, path: Path) -> str:
    return (f"verify the new key out of band, then remove the old one with `ssh-keygen -R '{name}' -f {path}` and "
            "apply again (with trust_on_first_use: true, or pin target.hosts[].host_key)")


def _fp_of_line(line: str) -> str:
    try:
        return "SHA256:" + base64.b64encode(hashlib.sha256(base64.b64decode(line.split()[1])).digest()).decode().rstrip("=")
    except (IndexError, ValueError):
        return "(unreadable)"


def _load(path: Path) -> paramiko.HostKeys | None:
    if not path.is_file():
        return None
    try:
        return paramiko.HostKeys(str(path))
    except (OSError, paramiko.SSHException) as e:
        raise RemoteError(f"cannot read known_hosts file {path}: {e}", "fix or remove the malformed line",
                          where="target.known_hosts") from None


def _record(path: Path, name: str, line: str) -> None:
    """Trust on first use: append the key so the next connection verifies against it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with path.open("a", encoding="utf-8") as f:
            f.write(f"{name} {line}\n")
    except OSError as e:
        raise RemoteError(f"cannot record the host key in {path}: {e}",
                          "make the file writable or set target.known_hosts to a writable path",
                          where="target.known_hosts") from None
