"""Drive a Pulumi dynamic provider through Pulumi's own provider host (`python -u -m pulumi.dynamic`, gRPC).

This client plays the engine's part, so a test can send one call the engine would only send in a set order
(a Read of a given state, an Update from a hand-made old state, a Delete of a half-created resource) and
see each answer exactly: it starts the host, sends Configure, then Check/Create/Diff/Update/Read/Delete with the serialized provider in `__provider`,
exactly as `pulumi up` would. Secrets follow the engine's rule: the host answers
acceptSecrets=False, so secret inputs are sent as plain values and any output of the same name
comes back marked secret (see `Result.secret_keys`).
"""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import struct_pb2
from pulumi.runtime.rpc import _special_secret_sig as SECRET_SIG
from pulumi.runtime.rpc import _special_sig_key as SIG

from tests.support.servers.s3 import stop_process

ROOT = Path(__file__).resolve().parents[2]
PROVIDER_KEY = "__provider"


class DynamicProviderError(Exception):
    """The provider raised: `details` holds the host's message (the Python traceback)."""

    def __init__(self, method: str, details: str):
        self.method, self.details = method, details
        super().__init__(f"{method} failed: {details[-2000:]}")


@dataclass
class Result:
    """A resource after Create/Update/Read: its id, outputs (no __provider) and which outputs are secret."""

    id: str
    outs: dict[str, Any]
    secret_keys: frozenset[str] = field(default_factory=frozenset)


@dataclass
class Diff:
    """What Diff answered: changes (True/False/None=unknown) and the properties forcing a replacement."""

    changes: bool | None
    replaces: list[str]
    delete_before_replace: bool


def serialize(provider: Any) -> str:
    """The `__provider` string Pulumi would store (dill, captured secret Outputs allowed)."""
    from pulumi.dynamic.dynamic import serialize_provider
    from pulumi.runtime._serialization import _serialize

    return provider if isinstance(provider, str) else _serialize(True, serialize_provider, provider)[0]


def _struct(props: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(props)
    return s


def _plain(struct: struct_pb2.Struct) -> dict[str, Any]:
    from pulumi.runtime import rpc

    return {k: rpc.unwrap_rpc_secret(v) for k, v in rpc.deserialize_properties(struct).items()}


class DynamicHost:
    """One `python -u -m pulumi.dynamic` process and a gRPC stub to it; use as a context manager."""

    def __init__(self, cwd: Path = ROOT, env: dict[str, str] | None = None, config: dict[str, Any] | None = None):
        from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

        self.pb = provider_pb2
        # The project (providers in infra/) and each test folder (providers defined in test modules, which
        # pytest imports by their bare name) must be importable: dill pickles classes by reference.
        folders = sorted({str(t.parent) for t in (ROOT / "tests").rglob("test_*.py")})
        path = os.pathsep.join(p for p in (str(ROOT), *folders, os.environ.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen([sys.executable, "-u", "-m", "pulumi.dynamic"], cwd=cwd,
                                     env={**os.environ, "PYTHONPATH": path, **(env or {})},
                                     stdout=subprocess.PIPE, stderr=None, text=True)
        line = self.proc.stdout.readline().strip()  # the host prints its port first (why -u matters)
        if not line.isdigit():
            self.close()
            raise RuntimeError(f"pulumi.dynamic did not print a port: {line!r}")
        self.channel = grpc.insecure_channel(f"127.0.0.1:{line}")
        self.stub = provider_pb2_grpc.ResourceProviderStub(self.channel)
        resp = self._call("Configure", provider_pb2.ConfigureRequest(args=_struct(config or {}), acceptSecrets=True))
        self.accepts_secrets = bool(resp.acceptSecrets)

    def _call(self, method: str, request: Any) -> Any:
        try:
            return getattr(self.stub, method)(request, timeout=120)
        except grpc.RpcError as e:
            raise DynamicProviderError(method, e.details() or str(e)) from None

    def _props(self, provider: Any, props: dict[str, Any], secret_keys: frozenset[str] = frozenset()) -> struct_pb2.Struct:
        body = {k: ({SIG: SECRET_SIG, "value": v} if k in secret_keys and self.accepts_secrets else v)
                for k, v in props.items()}
        return _struct({**body, PROVIDER_KEY: serialize(provider)})

    def _result(self, id_: str, props: struct_pb2.Struct, secret_keys: frozenset[str]) -> Result:
        outs = _plain(props)
        outs.pop(PROVIDER_KEY, None)
        return Result(id_, outs, frozenset(k for k in outs if k in secret_keys))

    def check(self, provider: Any, olds: dict[str, Any], news: dict[str, Any]) -> tuple[dict[str, Any], list]:
        """(checked inputs, failures as (property, reason))."""
        r = self._call("Check", self.pb.CheckRequest(urn=self.urn("check"), olds=self._props(provider, olds),
                                                    news=self._props(provider, news)))
        inputs = _plain(r.inputs)
        inputs.pop(PROVIDER_KEY, None)
        return inputs, [(f.property, f.reason) for f in r.failures]

    def create(self, provider: Any, inputs: dict[str, Any], secret_keys: tuple[str, ...] = (),
               name: str = "res") -> Result:
        """Create; the result's outs exclude __provider."""
        sk = frozenset(secret_keys)
        r = self._call("Create", self.pb.CreateRequest(urn=self.urn(name), properties=self._props(provider, inputs, sk)))
        return self._result(r.id, r.properties, sk)

    def diff(self, provider: Any, id_: str, olds: dict[str, Any], news: dict[str, Any], name: str = "res") -> Diff:
        """Diff old outputs against new inputs."""
        r = self._call("Diff", self.pb.DiffRequest(id=id_, urn=self.urn(name), olds=self._props(provider, olds),
                                                  news=self._props(provider, news)))
        changes = {self.pb.DiffResponse.DIFF_SOME: True, self.pb.DiffResponse.DIFF_NONE: False}.get(r.changes)
        return Diff(changes, list(r.replaces), bool(r.deleteBeforeReplace))

    def update(self, provider: Any, id_: str, olds: dict[str, Any], news: dict[str, Any],
               secret_keys: tuple[str, ...] = (), name: str = "res") -> Result:
        """Update in place."""
        sk = frozenset(secret_keys)
        r = self._call("Update", self.pb.UpdateRequest(id=id_, urn=self.urn(name), olds=self._props(provider, olds),
                                                      news=self._props(provider, news, sk)))
        return self._result(id_, r.properties, sk)

    def read(self, provider: Any, id_: str, props: dict[str, Any], name: str = "res") -> Result:
        """Refresh; an empty id means the resource is gone."""
        r = self._call("Read", self.pb.ReadRequest(id=id_, urn=self.urn(name), properties=self._props(provider, props)))
        return self._result(r.id, r.properties, frozenset())

    def delete(self, provider: Any, id_: str, props: dict[str, Any], name: str = "res") -> None:
        """Delete (props are the resource's outputs, as the engine sends them)."""
        self._call("Delete", self.pb.DeleteRequest(id=id_, urn=self.urn(name), properties=self._props(provider, props)))

    @staticmethod
    def urn(name: str) -> str:
        """A plausible URN for a dynamic resource."""
        return f"urn:pulumi:test::inferry::pulumi-python:dynamic:Resource::{name}"

    def close(self) -> None:
        """Stop the host."""
        if getattr(self, "channel", None) is not None:
            self.channel.close()
        stop_process(self.proc)
        if self.proc.stdout:
            self.proc.stdout.close()

    def __enter__(self) -> DynamicHost:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
