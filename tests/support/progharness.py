"""Whole-program harness: __main__.py under Pulumi mocks, each dynamic resource run by its real provider.

Like the engine: create on the first run; later runs diff against recorded state and update (or replace)
only where diff says so; resources gone from the program are deleted; destroy deletes in reverse order.
It is a `Deployer`, so `inferry migrate` runs end-to-end without the Pulumi CLI.

The real engine is the backbone (`pytest -m real_engine`). This harness stays where the real engine cannot
do as well: a failure injected between two steps of one run, many runs per test in seconds, and a Deployer
`inferry migrate` can be handed in-process: CLI lifecycle error paths and migrate journals
(test_cli_errors, test_migrate_local, test_migrate_plan, test_migrate_weights, test_lifecycle_bench), the
Kubernetes stacks' bucket lifecycle without a cluster (test_lifecycle_program),
migrate failing at each step on SSH hosts (test_migrate_ssh), the secret canaries, and its own semantics
(test_lifecycle_harness).
"""
from __future__ import annotations

import asyncio
import base64
import json
import runpy
import threading
import time
from pathlib import Path
from typing import Any, Callable

import dill
import pulumi
import pulumi.runtime
from pulumi.dynamic import Config as DynamicConfig
from pulumi.dynamic import ConfigureRequest
from pulumi.runtime._serialization import _deserialize
from pulumi.runtime.settings import SETTINGS, _get_rpc_manager
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from infra.errors import InferryError
from infra.lifecycle.deployer import Changes, OutputValue, Progress
from infra.stack.stackfile import Stack
from tests.support.harness import ROOT, RecordingMocks, Recorded, quiet_run_errors, stack_config, unsecret

DYNAMIC = "pulumi-python:dynamic"  # the type token's prefix: `...:Resource`, or `.../MODULE:NAME` when named
PROVIDER_KEY = "__provider"


def provider_of(props: dict[str, Any]):
    """The provider pickled in a dynamic resource's `__provider`, loaded and configured as Pulumi's provider
    host does (pulumi/dynamic/__main__.py: captured Outputs restore only inside `_deserialize`)."""
    provider = _deserialize(lambda: dill.loads(base64.b64decode(props[PROVIDER_KEY])))
    provider.configure(ConfigureRequest(config=DynamicConfig(raw_config={}, project_name="inferry")))
    return provider


def _changed(result, olds: dict, news: dict) -> bool:
    # DiffResult.changes None means "unknown": the engine then compares old and new inputs itself.
    return result.changes if result.changes is not None else olds != news


class DynamicMocks(RecordingMocks):
    """Mocks that hand dynamic resources to their real providers and keep state like the engine."""

    def __init__(self, old: dict[str, dict], preview: bool, progress: Progress):
        super().__init__()
        self.old, self.preview, self.progress = old, preview, progress
        self.new: dict[str, dict] = {}  # insertion order = completion order = dependency order
        self.ops: dict[str, int] = {}
        self.lock = threading.Lock()

    def _count(self, op: str, key: str) -> None:
        with self.lock:
            self.ops[op] = self.ops.get(op, 0) + 1
        if op != "same":
            typ, _, name = key.rpartition("::")
            self.progress(f"  {op} {typ.removeprefix(DYNAMIC).strip('/:')} {name}")

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        if not args.typ.startswith(DYNAMIC) or args.typ.endswith("inferry:Rollout"):
            # Kubernetes objects are mocks here: there is no Deployment for the rollout watcher to wait for
            # (tests/targets/kubernetes/test_cluster_kubernetes.py runs it against a real API server).
            return super().new_resource(args)
        self.resources.append(Recorded(args.typ, args.name, dict(args.inputs), args.provider))
        key = f"{args.typ}::{args.name}"  # the URN's distinguishing part
        news = unsecret(dict(args.inputs))
        provider = provider_of(news)
        old = self.old.get(key)
        check = provider.check(old["inputs"] if old else {}, news)
        if check.failures:
            raise InferryError(f"{args.name}: " + "; ".join(f"{f.property}: {f.reason}" for f in check.failures))
        news = {**(check.inputs or news), PROVIDER_KEY: news[PROVIDER_KEY]}
        rid, outs, op = self._apply(key, provider, old, news)
        record = {"id": rid, "inputs": news, "outputs": {**outs, PROVIDER_KEY: news[PROVIDER_KEY]}}
        with self.lock:
            if key in self.new:
                raise InferryError(f"two resources {key!r}: names must be unique per type")
            self.new[key] = record
        self._count(op, key)
        return rid, record["outputs"]

    def _apply(self, name: str, provider, old: dict | None, news: dict) -> tuple[str, dict, str]:
        if old is None:
            if self.preview:
                return f"{name}-preview", dict(news), "create"
            created = provider.create(news)
            return created.id, dict(created.outs or {}), "create"
        result = provider.diff(old["id"], old["outputs"], news)
        if not _changed(result, old["inputs"], news):
            return old["id"], dict(old["outputs"]), "same"
        if result.replaces:
            if self.preview:
                return old["id"], dict(news), "replace"
            if result.delete_before_replace:
                provider.delete(old["id"], old["outputs"])
            created = provider.create(news)
            if not result.delete_before_replace:
                provider.delete(old["id"], old["outputs"])
            return created.id, dict(created.outs or {}), "replace"
        if self.preview:
            return old["id"], dict(old["outputs"]), "update"
        updated = provider.update(old["id"], old["outputs"], news)
        return old["id"], dict(updated.outs if updated.outs is not None else {}), "update"


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


class ProgramHarness:
    """A `Deployer` running __main__.py in-process under DynamicMocks; state in JSON files."""

    def __init__(self, state_dir: Path, program: Callable[[], Any] | None = None):
        self.state_dir = Path(state_dir)
        self.program = program or (lambda: runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__"))
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.last: DynamicMocks | None = None

    def _path(self, stack: Stack) -> Path:
        return self.state_dir / f"{stack.name}.json"

    def state(self, stack: Stack) -> dict[str, Any]:
        """The recorded state: {"resources": {name: {id, inputs, outputs}}, "outputs": {...}}."""
        p = self._path(stack)
        return json.loads(p.read_text()) if p.exists() else {"resources": {}, "outputs": {}}

    def _save(self, stack: Stack, resources: dict, outputs: dict) -> None:
        self._path(stack).write_text(json.dumps({"resources": _plain(resources), "outputs": _plain(outputs)},
                                                indent=1))

    def _run(self, stack: Stack, preview: bool, progress: Progress) -> tuple[DynamicMocks, dict[str, OutputValue]]:
        assert stack.path is not None, "the harness runs stacks loaded from a file"
        old = self.state(stack)
        mocks = self.last = DynamicMocks(old["resources"], preview, progress)
        config, secret = stack_config(stack.path)
        _forget_failed_run()
        pulumi.runtime.set_mocks(mocks, project="inferry", stack=stack.name, preview=False)
        pulumi.runtime.set_all_config(config, secret)
        exports: dict[str, Any] = {}
        original = pulumi.export
        pulumi.export = lambda k, v: exports.__setitem__(k, v)  # type: ignore[assignment]
        try:
            _sync_await(run_pulumi_func(self.program))
            outputs = {k: _output(v) for k, v in exports.items()}
        except (Exception, SystemExit) as e:  # noqa: BLE001 - like the engine: keep what was done, then report
            _forget_failed_run()  # nor leave it to the next program run in this process
            if not preview:
                self._save(stack, {**old["resources"], **mocks.new}, old["outputs"])
            if isinstance(e, InferryError):
                raise
            raise InferryError(f"up failed: {type(e).__name__}: {e}", "see the error above", where=stack.name) from e
        finally:
            pulumi.export = original  # type: ignore[assignment]
        return mocks, outputs

    def check(self, stack: Stack) -> None:
        """The harness runs the program in this process: nothing to check."""

    def up(self, stack: Stack, progress: Progress) -> dict[str, OutputValue]:
        """Run the program; apply creates/updates; delete what the program no longer declares."""
        old = self.state(stack)["resources"]
        mocks, outputs = self._run(stack, False, progress)
        gone = [n for n in old if n not in mocks.new]
        for name in reversed(gone):
            provider_of(old[name]["outputs"]).delete(old[name]["id"], old[name]["outputs"])
            mocks._count("delete", name)
        self._save(stack, mocks.new, {k: {"value": v.value, "secret": v.secret} for k, v in outputs.items()})
        return outputs

    def preview(self, stack: Stack, progress: Progress) -> Changes:
        """Diff only: what up would do."""
        mocks, _ = self._run(stack, True, progress)
        return Changes(dict(mocks.ops))

    def destroy(self, stack: Stack, progress: Progress) -> Changes:
        """Delete every recorded dynamic resource, last created first."""
        resources = self.state(stack)["resources"]
        count = len(resources)
        for name in reversed(list(resources)):
            r = resources.pop(name)
            provider_of(r["outputs"]).delete(r["id"], r["outputs"])
            progress(f"  delete {name.rpartition('::')[2]}")
            self._save(stack, resources, {})
        self._save(stack, {}, {})
        return Changes({"delete": count} if count else {})

    def outputs(self, stack: Stack) -> dict[str, OutputValue]:
        """Outputs of the last up."""
        return {k: OutputValue(v["value"], v["secret"]) for k, v in self.state(stack)["outputs"].items()}


def _forget_failed_run() -> None:
    """The RPC manager and pending output tasks outlive set_mocks: a failed run would fail the next one too."""
    asyncio.get_event_loop().set_exception_handler(quiet_run_errors)
    _get_rpc_manager().clear()
    with SETTINGS.lock:
        for task in SETTINGS.outputs:
            task.cancel()
        SETTINGS.outputs.clear()


def _output(value: Any) -> OutputValue:
    if isinstance(value, pulumi.Output):
        return OutputValue(unsecret(_sync_await(value.future())), bool(_sync_await(value.is_secret())))
    return OutputValue(unsecret(value))


def write_stack(folder: Path, name: str, *, target: dict, storage_endpoint: str, env_prefix: str,
                provider: dict | None = None, port: int = 8000, bucket: str = "inferry-weights",
                **sections: Any) -> Path:
    """A stack file for tests: the example deployment with this target and store; secrets via {env: PREFIX_*}."""
    import yaml

    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.eu-ssh.yaml").read_text())
    d = doc["config"]["inferry:deployment"]
    env = lambda key: {"env": f"{env_prefix}_{key}"}  # noqa: E731
    d["target"] = target
    d["storage"] = {"endpoint": storage_endpoint, "region": "us-east-1", "bucket": bucket,
                    "access_key_id": env("S3_ACCESS"), "secret_access_key": env("S3_SECRET")}
    d["provider"] = {"name": name, "region": "test", "gpu": "H100-80GB", "price_per_gpu_hour": 2.79,
                     **(provider or {})}
    d["serving"] = {"port": port, "api_key": env("API_KEY")}
    d.pop("policy", None)
    d.update(sections)
    doc["config"] = {"inferry:deployment": d}
    doc.pop("encryptionsalt", None)
    path = Path(folder) / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


ANSWER_S = 10  # how long the Poller waits for one answer


class Poller(threading.Thread):
    """A client polling endpoints the whole time: each sample records which answered /v1/models. An endpoint is
    a URL, or a function giving it at each sample (None while there is none: not answering)."""

    def __init__(self, urls_keys: list[tuple[str | Callable[[], str | None], str]]):
        super().__init__(daemon=True)
        self.urls_keys, self.samples, self.stop = urls_keys, [], threading.Event()
        self.codes: list[tuple[float, tuple[int | None, ...]]] = []  # (time, status of each endpoint) per sample

    def settle(self, timeout: float = 60) -> None:
        """Wait until two whole samples were taken after this moment."""
        n, deadline = len(self.samples), time.monotonic() + timeout
        while len(self.samples) < n + 2:
            assert self.is_alive() and time.monotonic() < deadline, "the poller stopped sampling"
            time.sleep(0.01)

    def finish(self) -> list[tuple[bool, ...]]:
        """Settle, stop, and return the samples."""
        self.settle()
        self.stop.set()
        self.join(5)
        return self.samples

    def run(self) -> None:
        from infra.lifecycle.probe import get

        while not self.stop.is_set():
            urls = [(u() if callable(u) else u, k) for u, k in self.urls_keys]
            # A slow answer is still an answer: a request the gateway holds while it tries another replica, or
            # one slowed by a loaded machine, must not count as a failure (only a refusal, an error or no answer
            # within ANSWER_S does).
            codes = tuple(None if u is None else get(u + "/v1/models", ANSWER_S, k)[0] for u, k in urls)
            self.codes.append((time.monotonic(), codes))
            self.samples.append(tuple(c == 200 for c in codes))
            time.sleep(0.02)

    def failures(self) -> list[tuple[float, tuple[int | None, ...]]]:
        """The samples where an endpoint did not answer 200, with what it answered (0: none within ANSWER_S), for a
        failing assertion's message."""
        return [(t, c) for t, c in self.codes if any(x != 200 for x in c)]
