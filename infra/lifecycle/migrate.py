"""`inferry migrate`: move a serving deployment from stack A to stack B with no moment without an endpoint."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from infra.stack.secretfix import SecretField
from infra.errors import InferryError
from infra.lifecycle import probe
from infra.lifecycle.deployer import Deployer, Progress, endpoints
from infra.lifecycle.drain import Drain, drain, inside_counts
from infra.lifecycle.journal import Journal, load_rate, record_rate
from infra.lifecycle.stackdiff import FieldDiff, diff, pinned_changes
from infra.lifecycle.secrets import resolve
from infra.stack.stackfile import Stack

STEPS = ("copy", "up", "check", "destroy")
TITLES = {"copy": "copy and verify the weights into {b}'s store", "up": "bring up {b}",
          "check": "check {b} is healthy and answers a chat completion", "destroy": "destroy {a}"}
SKIPPABLE = ("copy", "up")  # the check always runs again: B may have changed since


@dataclass(frozen=True)
class Transfer:
    """What a weight copy did."""

    bytes_total: int
    bytes_copied: int
    seconds: float


class WeightMover(Protocol):
    """Moves a model's weights between two stacks' S3-compatible stores."""

    def size(self, stack: Stack) -> int:
        """Bytes of the model's files in the stack's store (from its manifest)."""

    def copy(self, src: Stack, dst: Stack, progress: Progress) -> Transfer:
        """Copy what dst lacks from src's store; idempotent."""

    def verify(self, stack: Stack) -> None:
        """Check the stack's store holds the manifest's files intact; StorageError otherwise."""


@dataclass(frozen=True)
class Estimate:
    """The weight copy before it happens: size, time at a rate, egress cost at the source's price."""

    nbytes: int
    rate: float
    rate_source: str
    egress_per_gb: float

    @property
    def seconds(self) -> float:
        """Expected copy time."""
        return self.nbytes / self.rate

    @property
    def egress_cost(self) -> float:
        """Egress charged by the source provider (decimal GB, as providers bill)."""
        return self.nbytes / 1e9 * self.egress_per_gb

    def line(self) -> str:
        """One line for the plan."""
        return (f"weights: {size(self.nbytes)}, ~{_duration(self.seconds)} at {self.rate / 1e6:.0f} MB/s "
                f"({self.rate_source}), egress ~${self.egress_cost:.2f} at ${self.egress_per_gb:.3f}/GB")


def size(nbytes: int) -> str:
    """Bytes in decimal units, as providers bill them: '2.1 MB', '16.07 GB'."""
    return f"{nbytes / 1e9:.2f} GB" if nbytes >= 1e9 else f"{nbytes / 1e6:.1f} MB"


def _duration(s: float) -> str:
    return f"{s:.0f}s" if s < 120 else f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h"


@dataclass
class Plan:
    """What a migration will do: the differences between the stacks and the weight copy."""

    diffs: list[FieldDiff]
    estimate: Estimate | None
    resume_from: list[str] = field(default_factory=list)


class MigrationError(InferryError):
    """A migration step failed; the source was left as it was."""

    def __init__(self, a: Stack, b: Stack, step: str, cause: BaseException, a_endpoints: list[str]):
        self.step = step
        if step == "destroy":
            serving = f"{b.name} passed every check and serves; {a.name} may be partly destroyed"
        else:
            serving = f"{a.name} is untouched" + (f" and still serving at {', '.join(a_endpoints)}"
                                                 if a_endpoints else "")
        reason = cause.render() if isinstance(cause, InferryError) else f"{type(cause).__name__}: {cause}"
        super().__init__(f"migration {a.name} -> {b.name} stopped at step '{step}': {reason}\n  {serving}",
                         f"fix the cause, then run `inferry migrate --from {a.name} --to {b.name}` again: "
                         f"it resumes at '{step}'")


class Migration:
    """One migration from stack a to stack b, step by step, journaled."""

    def __init__(self, a: Stack, b: Stack, deployer: Deployer, weights: WeightMover, *,
                 say: Progress = print, root: Path | None = None, health_timeout_s: float | None = None,
                 secret: Callable[[Stack], str] | None = None, drain: Drain | None = None):
        self.a, self.b, self.deployer, self.weights, self.say = a, b, deployer, weights, say
        self.drain = drain or Drain()
        self.root = root  # None: $INFERRY_STATE_DIR or the project's .inferry/
        self.health_timeout_s = health_timeout_s or _startup_timeout(b)
        self.api_key = secret or (lambda s: resolve(s.deployment.serving.api_key, s.name, SecretField.API_KEY, s.path))
        self.journal = Journal.open(self.root, a, b)
        self.a_endpoints: list[str] = []

    def plan(self, allow_changes: bool = False) -> Plan:
        """Diff the stacks (refusing model/engine changes unless allowed) and estimate the copy."""
        if self.a.name == self.b.name:
            raise InferryError(f"--from and --to are the same stack ({self.a.name})",
                               "name the stack serving now and the one to move to", where="migrate")
        diffs = diff(self.a.deployment, self.b.deployment)
        pinned = pinned_changes(diffs)
        if pinned and not allow_changes:
            lines = "\n".join(d.line() for d in pinned)
            raise InferryError(f"{self.a.name} and {self.b.name} serve different things:\n{lines}",
                               "a migration moves a deployment; make model and engine identical, "
                               "or pass --allow-changes", where=f"migrate {self.a.name} -> {self.b.name}")
        self.api_key(self.b)  # a missing secret stops the migration before anything is copied
        estimate = None
        if self.a.deployment.model.in_store:
            rate, source = load_rate(self.root)
            estimate = Estimate(self.weights.size(self.a), rate, source, self.a.deployment.provider.egress_per_gb)
        return Plan(diffs, estimate, [s for s in STEPS if self.journal.is_done(s)])

    def run(self, destroy_source: bool = False) -> list[str]:
        """Run every step not finished before; returns B's endpoints. A is touched only by the last step."""
        if self.journal.stale:
            self.say("the stack files changed since the last attempt: starting from the beginning")
        self.a_endpoints = self._source_endpoints()
        steps = [s for s in STEPS if s != "destroy" or destroy_source]
        for i, step in enumerate(steps, 1):
            title = TITLES[step].format(a=self.a.name, b=self.b.name)
            if step in SKIPPABLE and self.journal.is_done(step):
                self.say(f"[{i}/{len(steps)}] {title}: done earlier ({self.journal.done[step]}), skipping")
                continue
            self.say(f"[{i}/{len(steps)}] {title}")
            try:
                detail = getattr(self, f"_step_{step}")()
            except Exception as e:  # noqa: BLE001 - whatever failed, say where and that A still serves
                raise MigrationError(self.a, self.b, step, e, self.a_endpoints) from None
            self.journal.mark(step, detail)
            self.say(f"      ok: {detail}")
        b_endpoints = endpoints(self.deployer.outputs(self.b), self.b.name)
        self._cutover(b_endpoints, destroy_source)
        self.journal.finish()
        return b_endpoints

    def _source_endpoints(self) -> list[str]:
        try:
            found = endpoints(self.deployer.outputs(self.a), self.a.name)
        except InferryError:
            self.say(f"note: {self.a.name} has no endpoint (not deployed?): nothing serves during the move")
            return []
        healthy = [e for e in found if probe.healthy(e)]
        state = ", ".join(f"{e} ({'healthy' if e in healthy else 'NOT answering'})" for e in found)
        self.say(f"{self.a.name} serves at {state}")
        return healthy  # what keeps serving while B comes up

    def _step_copy(self) -> str:
        if not self.a.deployment.model.in_store:
            return f"weights at {self.a.deployment.model.weights} are on the hosts: nothing to copy"
        t = self.weights.copy(self.a, self.b, lambda line: self.say(f"      {line}"))
        self.weights.verify(self.b)
        if t.bytes_copied:
            record_rate(self.root, t.bytes_copied, t.seconds)
        return f"{size(t.bytes_copied)} of {size(t.bytes_total)} copied in {t.seconds:.1f}s, verified"

    def _step_up(self) -> str:
        outputs = self.deployer.up(self.b, lambda line: self.say(f"      {line}"))
        return f"{self.b.name} up at {', '.join(endpoints(outputs, self.b.name))}"

    def _step_check(self) -> str:
        key = self.api_key(self.b)
        model = self.b.deployment.model.name
        found = endpoints(self.deployer.outputs(self.b), self.b.name)
        for url in found:
            probe.wait_healthy(url, self.health_timeout_s)
            reply = probe.chat_check(url, key, model)
            self.say(f"      {url}: healthy; {model} answered {reply.strip()[:40]!r}")
        return f"{len(found)} endpoint(s) healthy and answering"

    def _step_destroy(self) -> str:
        idle = drain(self.a.name, self._source_endpoints(), self.drain, self.say,  # no request is cut off
                     inside=inside_counts(self.a))
        self.say(f"      {idle}")
        from infra.privacy.removal import destroy_recorded

        indent = lambda line: self.say(f"      {line}")  # noqa: E731
        changes = destroy_recorded(self.a, lambda: self.deployer.destroy(self.a, indent), indent)
        self.a_endpoints = []
        return f"{self.a.name} destroyed ({changes.line()})"

    def _cutover(self, b_endpoints: list[str], destroyed: bool) -> None:
        self.say("")
        a_line = ", ".join(self.a_endpoints) or ("(destroyed)" if destroyed else "(none)")
        self.say(f"{self.a.name}: {a_line}")
        self.say(f"{self.b.name}: {', '.join(b_endpoints)}")
        api = probe.base_url(b_endpoints[0]) + "/v1"
        if destroyed:
            self.say(f"cutover done: {self.a.name} is destroyed; clients must use {api}")
        else:
            self.say(f"cutover: point clients (OPENAI_BASE_URL) at {api}; both serve until you run "
                     f"`inferry destroy {self.a.name}`")


def _startup_timeout(stack: Stack) -> float:
    t = stack.deployment.target
    return float(getattr(t, "health_timeout_s", None) or getattr(t, "startup_timeout_s", 900))
