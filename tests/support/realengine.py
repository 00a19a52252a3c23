"""The real Pulumi engine in tests: the CLI from PATH or scripts/tools.sh, in a project folder of its own.

A `Project` is laid out as a pip user's folder after `inferry init` (or, for the few tests that need it, as a
checkout): Pulumi.yaml, stacks/Pulumi.NAME.yaml, state in .inferry/state.
`inferry` runs as a user runs it (a subprocess in that folder); `pulumi` too, with the backend that
`inferry` chose (README: `pulumi login file://$PWD/.inferry/state`). Nothing may download: update checks and
automatic plugin downloads are off, and PULUMI_HOME is the project's own.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import ROOT

TOOLS_BIN = Path(os.environ.get("INFERRY_TOOLS") or Path.home() / ".cache" / "inferry" / "tools") / "bin"
PASSPHRASE = "inferry-test-passphrase-" + "3" * 8
NEEDED = ("pulumi", "pulumi-resource-pulumi-python")


def tools_path() -> str:
    """PATH with the Pulumi CLI and its Python plugin; fails loudly when they are missing (no skip)."""
    path = f"{os.environ.get('PATH', '')}{os.pathsep}{TOOLS_BIN}"
    missing = [t for t in NEEDED if shutil.which(t, path=path) is None]
    if missing:
        raise RuntimeError(f"the real-engine tests need {', '.join(missing)}: run `bash scripts/tools.sh` "
                           "(builds the Pulumi CLI from Go modules) or install the Pulumi CLI")
    return path


class Project:
    """A project folder with the real CLI; `inferry(...)` and `pulumi(...)` run there as a user types them.

    With `install` (the bin folder of the venv a wheel went into: tests/support/wheel.py `installed`), it is a
    pip user's folder: `inferry init NAME` makes it a project with the first stack, `inferry` and the program
    come from that venv alone (first on PATH, no PYTHONPATH). Without, the checkout's program is linked in, for
    the test that needs this tree's files in the folder (an older program upgraded to this one)."""

    def __init__(self, folder: Path, install: Path | None = None, env: dict[str, str] | None = None):
        self.folder, self.install = Path(folder), install
        (self.folder / "stacks").mkdir(parents=True, exist_ok=True)
        home = self.folder / ".pulumi-home"
        home.mkdir(exist_ok=True)
        base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PULUMI_BACKEND_URL")}
        path = tools_path() if install is None else f"{install}{os.pathsep}{tools_path()}"
        self.env = {**base, "PATH": path, "PULUMI_HOME": str(home), "PULUMI_SKIP_UPDATE_CHECK": "true",
                    "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true", "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE}
        if install is not None:
            self.env["VIRTUAL_ENV"] = str(install.parent)
        else:
            self._link_checkout()
        self.env.update(env or {})

    def _link_checkout(self) -> None:
        """Pulumi.yaml, the program and, as Pulumi.yaml's virtualenv, the venv these tests run in (a git worktree
        has none of its own: the language host of a typed `pulumi refresh` would find no Python there)."""
        shutil.copy(ROOT / "Pulumi.yaml", self.folder / "Pulumi.yaml")
        venv = Path(sys.prefix) if sys.prefix != sys.base_prefix else ROOT / ".venv"
        links = {"__main__.py": ROOT / "__main__.py", "infra": ROOT / "infra", ".venv": venv}
        for name, target in links.items():
            if not (self.folder / name).exists():
                (self.folder / name).symlink_to(target)
        # the checkout under test, also where the venv's editable install is another checkout's
        self.env["PYTHONPATH"] = str(ROOT)

    @property
    def state(self) -> Path:
        """The local file backend inferry uses by default."""
        return self.folder / ".inferry" / "state"

    def stack_file(self, name: str) -> Path:
        """Where a stack's file lives."""
        return self.folder / "stacks" / f"Pulumi.{name}.yaml"

    def inferry_argv(self) -> list[str]:
        """The installed `inferry` command: the wheel's, or this venv's."""
        return [str((self.install or Path(sys.executable).parent) / "inferry")]

    def inferry(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
        """`inferry ARGS` in the project folder; check=True fails with its output when it exits non-zero."""
        return self._run([*self.inferry_argv(), *args], self.env, check, timeout)

    def run(self, argv: list[str], check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
        """Any command in the project folder with the project's environment (e.g. inferry under a wrapper)."""
        return self._run(argv, self.env, check, timeout)

    def pulumi(self, *args: str, check: bool = True, stdin: str | None = None,
               timeout: float = 600) -> subprocess.CompletedProcess:
        """`pulumi ARGS` in the project folder, on the backend inferry uses."""
        env = {**self.env, "PULUMI_BACKEND_URL": f"file://{self.state}"}
        self.state.mkdir(parents=True, exist_ok=True)
        return self._run(["pulumi", *args], env, check, timeout, stdin)

    def _run(self, cmd: list[str], env: dict, check: bool, timeout: float,
             stdin: str | None = None) -> subprocess.CompletedProcess:
        proc = subprocess.run(cmd, cwd=self.folder, env=env, capture_output=True, text=True, timeout=timeout,
                              input=stdin)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(cmd[:4])}... exited {proc.returncode}\n"
                                 f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")
        return proc

    def write_stack(self, name: str, deployment: dict[str, Any], secrets: dict[str, str]) -> Path:
        """A stack file with this deployment; each secret set as a user does: `pulumi config set --secret`
        with the value on stdin (never on a command line)."""
        path = self.stack_file(name)
        if self.install is not None and not path.exists():  # as a user starts: then edits what init wrote
            kind = deployment.get("target", {}).get("kind", "ssh")
            self.inferry("init", name, "--target", kind, "--engine", deployment.get("engine", {}).get("kind", "vllm"))
        path.write_text(yaml.safe_dump({"config": {"inferry:deployment": deployment}}, sort_keys=False))
        if self.pulumi("stack", "ls", "--json").stdout.find(f'"name": "{name}"') < 0:
            self.pulumi("stack", "init", name, "--secrets-provider", "passphrase")
        for key, value in secrets.items():
            self.pulumi("config", "set", "--secret", "--stack", name, f"inferry:{key}", stdin=value)
        return path

    def set_deployment(self, name: str, deployment: dict[str, Any]) -> None:
        """Replace the stack's deployment, keeping its secrets (as a user edits the file)."""
        path = self.stack_file(name)
        doc = yaml.safe_load(path.read_text())
        doc["config"]["inferry:deployment"] = deployment
        path.write_text(yaml.safe_dump(doc, sort_keys=False))

    def export(self, name: str) -> dict[str, Any]:
        """`pulumi stack export` (secrets stay ciphertext)."""
        return json.loads(self.pulumi("stack", "export", "--stack", name).stdout)

    def resources(self, name: str) -> dict[str, dict]:
        """The stack's resources in state by name (the URN's last part)."""
        found = self.export(name)["deployment"].get("resources") or []
        return {r["urn"].rsplit("::", 1)[-1]: r for r in found}


def model_store(server_factory, host_network, keys: tuple[str, str], tmp: Path, with_model: bool = True):
    """An S3 server the test hosts reach, with these keys and the weights bucket; holding the test model
    (tests/ssh_env.FILES, pushed with its manifest) unless with_model is false."""
    from infra.storage.settings import StoreSettings
    from infra.storage.sync import push
    from tests.support.ssh_env import BUCKET, FILES, PREFIX

    server = server_factory(*keys, host=host_network.gateway)
    (server.root / BUCKET).mkdir(parents=True, exist_ok=True)
    if with_model:
        model = tmp / "model"
        model.mkdir(exist_ok=True)
        for rel, data in FILES.items():
            (model / rel).write_bytes(data)
        push(StoreSettings(server.endpoint, server.region, BUCKET, *keys), model, PREFIX, show=False)
    return server


def ssh_stack(hosts: list, server, provider: str = "test-cloud", **target: Any) -> dict[str, Any]:
    """vLLM on these test hosts (process runtime unless `runtime` says), weights from the store's model, every
    secret by reference to the stack's Pulumi secrets (sshPrivateKey, s3AccessKey, s3SecretKey, apiKey)."""
    from tests.support.ssh_env import BUCKET, MODEL, PREFIX

    return {
        "model": {"name": MODEL, "weights": f"s3://{BUCKET}/{PREFIX}"},
        "engine": {"kind": "vllm", "max_model_len": 4096},
        "target": {"kind": "ssh", "runtime": "process", "health_timeout_s": 30,
                   "private_key": {"config": "sshPrivateKey"},
                   "hosts": [{"address": h.address, "name": h.name, "host_key": h.host_key_line} for h in hosts],
                   **target},
        "storage": {"endpoint": server.endpoint, "region": server.region, "bucket": BUCKET,
                    "access_key_id": {"config": "s3AccessKey"}, "secret_access_key": {"config": "s3SecretKey"}},
        "provider": {"name": provider, "region": "eu-test", "gpu": "H200", "price_per_gpu_hour": 3.0},
        "serving": {"port": 8000, "api_key": {"config": "apiKey"}},
    }
