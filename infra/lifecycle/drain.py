"""Before a serving stack goes: wait until its engines have had no request running or waiting for a while."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from infra.errors import InferryError
from infra.lifecycle import probe
from infra.lifecycle.status import parse_metrics


@dataclass(frozen=True)
class Drain:
    """How long the engines must be idle (grace_s), and how long to wait for that at most (timeout_s)."""

    grace_s: float = 10.0
    timeout_s: float = 300.0
    poll_s: float = 0.5


def busy(url: str) -> int | None:
    """Requests running or waiting on the engine behind url, from its Prometheus /metrics; None when they
    cannot be read (no answer, or an engine without those metrics, such as trtllm-serve's JSON)."""
    code, text = probe.get(probe.base_url(url) + "/metrics", 3)
    return busy_in(text) if code == 200 else None


def busy_in(text: str | None) -> int | None:
    """Requests running or waiting in an engine's /metrics text; None when it has no such numbers."""
    if text is None or text.lstrip().startswith(("[", "{")):
        return None
    try:
        m = parse_metrics(text)
    except (ValueError, KeyError):
        return None
    if m.running is None and m.waiting is None:
        return None
    return int((m.running or 0) + (m.waiting or 0))


def drain(name: str, urls: list[str], d: Drain, say: Callable[[str], None],
          clock: Callable[[], float] = time.monotonic,
          inside: Callable[[], list[int | None]] | None = None) -> str:
    """Wait until every url reports no request for d.grace_s; InferryError when d.timeout_s passes first.
    With inside, the counts come from it (each replica read from inside the deployment: a gateway refuses
    /metrics to the internet) instead of each url's /metrics."""
    if not urls:
        return f"{name} has no endpoint answering: nothing to drain"
    where = "each replica, read from inside" if inside else ", ".join(urls)
    say(f"      draining {name}: waiting until no request runs or waits for {d.grace_s:g}s "
        f"(at most {d.timeout_s:g}s) on {where}")
    start, last = clock(), 0
    quiet_since: float | None = None
    while True:
        counts = inside() if inside else [busy(u) for u in urls]
        known = [c for c in counts if c is not None]
        now = clock()
        if sum(known) != last:
            say(f"      {name}: {sum(known)} request(s) running or waiting")
            last = sum(known)
        if sum(known):
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        if quiet_since is not None and now - quiet_since >= d.grace_s:
            unread = len(counts) - len(known)
            return f"{name} idle for {d.grace_s:g}s" + (f" (metrics unreadable on {unread}: waited the grace "
                                                         "period only)" if unread else "")
        if now - start > d.timeout_s:
            raise InferryError(f"{name} still had {sum(known)} request(s) running or waiting after {d.timeout_s:g}s",
                               f"move the clients off {name} first (DNS or the endpoint printed for the new stack), "
                               "or raise --drain-timeout; the migration resumes at 'destroy'", where=name)
        time.sleep(d.poll_s)


def inside_counts(stack) -> Callable[[], list[int | None]] | None:
    """A reader of each replica's running + waiting requests from inside the stack's deployment, where its
    target reads /metrics there (SSH hosts); None where the endpoints serve them."""
    from infra.lifecycle.secrets import resolver
    from infra.targets.registry import target_for

    target, resolve = target_for(stack.deployment.target.kind), resolver(stack)
    if target.engine_metrics(stack, resolve) is None:
        return None
    return lambda: [busy_in(r.text) for r in target.engine_metrics(stack, resolve)]
