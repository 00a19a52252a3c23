"""Pulumi dynamic providers for the SSH steps: honest diffs, secrets in as inputs, never out as outputs."""
from __future__ import annotations

import hashlib
import json
import os
import threading
from abc import ABC, abstractmethod
from typing import Any

from pulumi.dynamic import ConfigureRequest, CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from infra.errors import reported
from infra.stack.secretfix import KEY_STAND_IN
from infra.targets.ssh.hostcalls import serve_more_calls
from infra.targets.ssh.rollout import ROLLING, ROLLOUT

# The remote operations (paramiko, the config models: about a second of imports) are imported where they run:
# Pulumi's plugin imports this module to answer every call, and a no-op `pulumi up` only diffs.

VERIFY_WEIGHTS = "INFERRY_VERIFY_WEIGHTS"
IN_SYNC = "in-sync"  # the host part of a fingerprint: what `refresh` found differs from the last apply
SECRETS = ("private_key", "access_key_id", "secret_access_key", "secret_values", "api_key")
# How this machine works, not what the host holds: never a change (state written with it still diffs clean).
UNDIFFED = ("max_parallel",)
_SLOTS: dict[int, threading.BoundedSemaphore] = {}
_SLOTS_GUARD = threading.Lock()


def _slot(n: int) -> threading.BoundedSemaphore:
    """target.max_parallel: at most n hosts worked on at once in this process."""
    with _SLOTS_GUARD:
        return _SLOTS.setdefault(n, threading.BoundedSemaphore(n))


def _plain(value: Any) -> Any:
    """Pulumi hands numbers back as floats: 8.0 and 8 must digest alike."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(_plain(value), sort_keys=True, default=str).encode()).hexdigest()


def run_again() -> DiffResult:
    """A diff that says the step must run again on its host (no replacement)."""
    return DiffResult(changes=True, replaces=[], stables=[], delete_before_replace=True)


def kept_key(props: dict) -> dict:
    """The private key as an output (a secret in state, as its input was) where no reference gives it back: a
    component's key is another resource's value, and delete, replacement and refresh get only the outputs."""
    if (props.get("private_key_ref") or {}).get("env") == KEY_STAND_IN and props.get("private_key"):
        return {"private_key": props["private_key"]}
    return {}


def fingerprint(props: dict) -> dict:
    """Per-input digests (secrets only as one salted digest) stored in outputs, so diff compares inputs."""
    plain = {k: _digest(v) for k, v in props.items()
             if k not in SECRETS and k not in UNDIFFED and not k.startswith("__")}
    secret = _digest(["inferry-secrets-v1"] + [props.get(k) for k in SECRETS])
    return {"inputs": plain, "secrets": secret, "host": IN_SYNC}


class _Step(ResourceProvider, ABC):
    """Shared diff and CRUD plumbing; subclasses implement _apply and _remove."""

    replace_on: tuple[str, ...] = ("conn",)  # another host is another resource
    _cfg: Any = None

    def configure(self, req: ConfigureRequest) -> None:
        """Keep the stack config: delete reads the SSH key through its reference, not from state."""
        # ConfigureRequest.config is "stack configuration for the current deployment" (Pulumi dynamic docs).
        self._cfg = req.config
        serve_more_calls()  # the first call of a provider in this process: before any step holds a thread

    @reported
    def diff(self, _id: str, olds: dict, news: dict) -> DiffResult:
        """Changed when any input's digest differs from the one recorded at the last apply."""
        old, new = olds.get("fingerprint") or {}, fingerprint(news)
        keys = (set(old.get("inputs", {})) | set(new["inputs"])) - set(UNDIFFED)
        changed = [k for k in sorted(keys) if old.get("inputs", {}).get(k) != new["inputs"].get(k)]
        if old.get("secrets") != new["secrets"]:
            changed.append("secrets")
        if old.get("host", IN_SYNC) != IN_SYNC:
            changed.append("drift")  # `refresh` found the host changed behind Pulumi's back: converge it
        replaces = [k for k in changed if k in self.replace_on]
        return DiffResult(changes=bool(changed), replaces=replaces, stables=[], delete_before_replace=True)

    @reported
    def create(self, props: dict) -> CreateResult:
        """Converge the host to the inputs (safe to repeat)."""
        outs = self._run(props)
        return CreateResult(id_=f"{props['conn']['address']}:{int(props['conn'].get('port', 22))}", outs=outs)

    @reported
    def update(self, _id: str, _olds: dict, news: dict) -> UpdateResult:
        """Same as create: read state, change only the difference."""
        return UpdateResult(outs=self._run(news))

    @reported
    def delete(self, _id: str, props: dict) -> None:
        """Remove what the step put on the host."""
        key = props.get("private_key") or self._resolve(props.get("private_key_ref") or {})
        with _slot(int(props.get("max_parallel", 64))):
            self._remove(props, key)

    @reported
    def read(self, id_: str, props: dict) -> ReadResult:
        """`pulumi refresh`: what differs on the host from the last apply is recorded as `drift`, and the next
        `up` sees the resource changed and converges it. Nothing on the host is changed here."""
        key = props.get("private_key") or self._resolve(props.get("private_key_ref") or {})
        with _slot(int(props.get("max_parallel", 64))):
            drift = self._drift(props, key)
        fp = {**(props.get("fingerprint") or {}), "host": _digest(drift) if drift else IN_SYNC}
        return ReadResult(id_, {**props, "drift": drift, "fingerprint": fp})

    def _run(self, props: dict) -> dict:
        with _slot(int(props.get("max_parallel", 64))):
            report = self._apply(props)
        keep = {k: v for k, v in props.items() if k not in SECRETS and not k.startswith("__")}
        return {**keep, **kept_key(props), **report, "drift": [], "fingerprint": fingerprint(props)}

    def _resolve(self, ref: dict) -> str:
        """A secret by reference: Pulumi config (given to configure) or an environment variable."""
        if ref.get("config") and self._cfg is not None:
            return str(self._cfg.get(f"inferry:{ref['config']}") or "")
        return os.environ.get(ref.get("env") or "", "")

    @abstractmethod
    def _apply(self, props: dict) -> dict:
        """Converge the host to props; returns the step's report (no secrets)."""

    @abstractmethod
    def _remove(self, props: dict, key: str) -> None:
        """Undo what _apply put on the host."""

    def _drift(self, props: dict, key: str) -> list[str]:
        """What differs on the host from what the last apply left there (none by default)."""
        return []


class HostProvider(_Step):
    """Facts, preflight, Docker + NVIDIA toolkit when allowed."""

    def _apply(self, props: dict) -> dict:
        from infra.targets.ssh.args import asdict, host_args
        from infra.targets.ssh.host import ensure_host

        return asdict(ensure_host(host_args(props), props["private_key"]))

    def _remove(self, props: dict, key: str) -> None:
        return None  # installed software stays: other things on the host may use it


def verify_weights() -> bool:
    """`inferry up --verify-weights` (VERIFY_WEIGHTS in the environment): hash every cached file again."""
    return os.environ.get(VERIFY_WEIGHTS) == "1"


class WeightsProvider(_Step):
    """Weights into the host's cache from presigned URLs; the S3 keys stay on this machine."""

    @reported
    def diff(self, _id: str, olds: dict, news: dict) -> DiffResult:
        """As every step, or changed when a full verification is asked for."""
        found = super().diff(_id, olds, news)
        return run_again() if verify_weights() and not found.changes else found

    def _apply(self, props: dict) -> dict:
        from infra.targets.ssh.args import asdict, weights_args
        from infra.targets.ssh.weights import ensure_weights, presigned

        a = weights_args(props)
        entries = presigned(a.store, props["access_key_id"], props["secret_access_key"])
        return asdict(ensure_weights(a, props["private_key"], entries, full=verify_weights()))

    def _remove(self, props: dict, key: str) -> None:
        from infra.targets.ssh.args import weights_args
        from infra.targets.ssh.weights import remove_weights

        remove_weights(weights_args(props), key)

    def _drift(self, props: dict, key: str) -> list[str]:
        from infra.targets.ssh.args import weights_args
        from infra.targets.ssh.weights import weights_drift

        return weights_drift(weights_args(props), key, str(props.get("manifest_sha256") or ""),
                             int(props.get("files") or 0), int(props.get("bytes") or 0))


class ServiceProvider(_Step):
    """Service files, restart when needed, health gate; outputs the endpoint."""

    @reported
    def diff(self, _id: str, olds: dict, news: dict) -> DiffResult:
        """As every step, or changed when the host runs no engine now (rebooted under the process runtime, whose
        engine nothing restarts): the update starts it again, on that host alone."""
        found = super().diff(_id, olds, news)
        if found.changes or not isinstance(news.get("private_key"), str) or not news.get("private_key"):
            return found  # changing anyway, or the key is not known yet (a preview of a new component's hosts)
        from infra.targets.ssh.args import service_args
        from infra.targets.ssh.status import engine_down

        with _slot(int(news.get("max_parallel", 64))):
            down = engine_down(service_args(news), news["private_key"])
        return run_again() if down else found

    def _apply(self, props: dict) -> dict:
        from infra.targets.ssh.args import asdict, service_args
        from infra.targets.ssh.service import ensure_service

        rollout = ROLLOUT.width(int(props[ROLLING])) if props.get(ROLLING) else None  # True (older state): 1
        return asdict(ensure_service(service_args(props), props["private_key"],
                                     dict(props.get("secret_values") or {}), rollout))

    def _remove(self, props: dict, key: str) -> None:
        from infra.targets.ssh.args import service_args
        from infra.targets.ssh.service import remove_service

        remove_service(service_args(props), key)

    def _drift(self, props: dict, key: str) -> list[str]:
        from infra.targets.ssh.args import service_args
        from infra.targets.ssh.service import service_drift

        return service_drift(service_args(props), key)


class GatewayProvider(_Step):
    """Caddy on one host: the deployment's only public listener."""

    def _apply(self, props: dict) -> dict:
        from infra.targets.ssh.args import asdict, gateway_args
        from infra.targets.ssh.gateway import ensure_gateway, gateway_secrets

        return asdict(ensure_gateway(gateway_args(props), props["private_key"],
                                     gateway_secrets(props.get("secret_values") or {})))

    def _remove(self, props: dict, key: str) -> None:
        from infra.targets.ssh.args import gateway_args
        from infra.targets.ssh.gateway import remove_gateway

        remove_gateway(gateway_args(props), key)

    def _drift(self, props: dict, key: str) -> list[str]:
        from infra.targets.ssh.args import gateway_args
        from infra.targets.ssh.gateway import gateway_drift

        return gateway_drift(gateway_args(props), key, str(props.get("config_sha256", "")))
