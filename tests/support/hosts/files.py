"""Files a test host is made of: its sshd config, keys, and the stand-in tools it can read."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SSHD_CONFIG = """\
Port 22
ListenAddress 0.0.0.0
HostKey {d}/ssh_host_ed25519_key
PidFile {d}/sshd.pid
AuthorizedKeysFile {d}/authorized_keys
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
Subsystem sftp internal-sftp
AcceptEnv LANG LC_*
UseDNS no
PrintMotd no
PrintLastLog no
MaxStartups 100:30:200
MaxSessions 100
LogLevel VERBOSE
"""


def copy_tools(dest: Path) -> Path:
    """Copy the stand-ins (with the engines' stdlib-only option snapshots and their own code the stand-ins
    run, tests/support/engine_code.py) where hosts can read them.

    The checkout may live under /tmp, /root or /home, which every host replaces with its own.
    """
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(REPO / "tests" / "support" / "standin", dest / "tests" / "support" / "standin", ignore=ignore)
    engines = REPO / "infra" / "engines"
    if (engines / "options.py").is_file():
        (dest / "infra" / "engines").mkdir(parents=True)
        shutil.copy(engines / "options.py", dest / "infra" / "engines" / "options.py")
        shutil.copytree(engines / "snapshots", dest / "infra" / "engines" / "snapshots", ignore=ignore)
    from tests.support import engine_code  # the engines' own files the stand-in runs

    engine_code.copy_into(dest / "tests" / "support" / "standin" / "engine_code")
    return dest / "tests" / "support" / "standin"


def host_python() -> str:
    """A python3 the hosts can run: this machine's may live under /root (pyenv), which hosts replace."""
    for candidate in ("/usr/bin/python3", os.path.realpath(sys.executable)):
        if os.path.exists(candidate) and not candidate.startswith(("/root/", "/home/", "/tmp/")):
            return candidate
    raise RuntimeError("test hosts need a python3 outside /root, /home and /tmp (e.g. apt install python3)")


def keygen(path: Path) -> str:
    """Make an ed25519 keypair at path; return the public line 'ssh-ed25519 AAAA...'."""
    for p in (path, path.with_suffix(".pub")):
        p.unlink(missing_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(path)], check=True)
    return " ".join(Path(f"{path}.pub").read_text().split()[:2])
