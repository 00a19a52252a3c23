"""`inferry status`: each endpoint's health and the engine's live metrics, from its Prometheus text."""
from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from infra.engines.contract import MetricNames
from infra.lifecycle import probe



def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus' histogram_quantile over cumulative (upper bound, count) buckets; None without samples."""
    buckets = sorted(buckets)
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if math.isinf(upper):
                return lower  # the +Inf bucket: the highest finite bound is the best answer
            if count == below:
                return upper
            return lower + (upper - lower) * (rank - below) / (count - below)
        lower, below = upper, count
    return lower


@dataclass(frozen=True)
class EngineMetrics:
    """The live numbers an operator looks at first."""

    kv_cache_usage: float | None  # fraction 0..1 of the KV-cache blocks in use
    running: float | None
    waiting: float | None
    ttft_p50: float | None  # seconds, since the engine started
    ttft_p95: float | None
    ttft_count: int


def _names(families: list) -> MetricNames | None:
    """The registered engine whose metric names the text carries (an --endpoint has no stack to say which)."""
    from infra.engines.registry import ENGINES

    seen = {s.name for f in families for s in f.samples}
    for e in ENGINES:
        m = e.metrics
        if m and seen & {m.kv_usage, m.running, m.waiting, m.ttft + "_count"}:
            return m
    return None


def parse_metrics(text: str) -> EngineMetrics:
    """Read the engine's metrics from Prometheus text (summing over label sets, e.g. per engine or DP rank),
    under the names of whichever engine served it."""
    families = list(text_string_to_metric_families(text))
    names = _names(families)
    gauges: dict[str, list[float]] = defaultdict(list)
    buckets: dict[float, float] = defaultdict(float)
    count = 0.0
    for family in families if names else []:
        for s in family.samples:
            if s.name in (names.kv_usage, names.running, names.waiting):
                gauges[s.name].append(s.value)
            elif s.name == names.ttft + "_bucket":
                buckets[float(s.labels["le"])] += s.value
            elif s.name == names.ttft + "_count":
                count += s.value
    kv = gauges.get(names.kv_usage) if names else None
    return EngineMetrics(
        kv_cache_usage=sum(kv) / len(kv) if kv else None,
        running=sum(gauges[names.running]) if names and names.running in gauges else None,
        waiting=sum(gauges[names.waiting]) if names and names.waiting in gauges else None,
        ttft_p50=histogram_quantile(0.5, list(buckets.items())),
        ttft_p95=histogram_quantile(0.95, list(buckets.items())),
        ttft_count=int(count))


def metrics_lines(m: EngineMetrics) -> list[str]:
    """The two lines `inferry status` prints for one engine's metrics."""
    kv = f"{m.kv_cache_usage * 100:.1f}%" if m.kv_cache_usage is not None else "n/a"
    ttft = (f"p50 {m.ttft_p50 * 1000:.0f} ms, p95 {m.ttft_p95 * 1000:.0f} ms over {m.ttft_count} requests"
            if m.ttft_p50 is not None and m.ttft_p95 is not None else "no requests yet")
    return [f"  KV cache: {kv}   running: {_n(m.running)}   waiting: {_n(m.waiting)}",
            f"  time to first token: {ttft}"]


@dataclass(frozen=True)
class EndpointStatus:
    """One endpoint: does it answer, and what its engine reports (when read through it)."""

    url: str
    healthy: bool
    metrics: EngineMetrics | None = None
    error: str | None = None
    adapters: tuple[str, ...] = ()  # the LoRA adapters /v1/models lists (entries with a parent model)

    def lines(self) -> list[str]:
        """How `inferry status` prints it (the head alone when the metrics are read from inside)."""
        head = [f"{self.url}  {'healthy' if self.healthy else 'NOT HEALTHY'}"]
        head += [f"  adapters: {', '.join(self.adapters)}"] if self.adapters else []
        if self.metrics is None:
            return head + ([f"  metrics: {self.error}"] if self.error else [])
        return [*head, *metrics_lines(self.metrics)]


@dataclass(frozen=True)
class ReplicaStatus:
    """One replica's engine metrics read from inside the deployment (over SSH, in the cluster)."""

    source: str
    metrics: EngineMetrics | None = None
    error: str | None = None
    at_zero: bool = False  # scaled to zero on purpose: the door answers 503 until a request wakes a replica

    def lines(self) -> list[str]:
        """How `inferry status` prints it."""
        if self.at_zero:
            return [f"{self.source}: {self.error}"]
        if self.metrics is None:
            return [f"{self.source} engine metrics: {self.error or 'unavailable'}"]
        return [f"{self.source} engine metrics:", *metrics_lines(self.metrics)]


def _n(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.0f}"


def read_text(text: str) -> tuple[EngineMetrics | None, str | None]:
    """An engine's /metrics body as metrics, or why it cannot be read."""
    if text.lstrip().startswith(("[", "{")):
        # trtllm-serve's /metrics is JSON iteration statistics, not Prometheus text (its trtllm-serve docs).
        return None, "the engine reports JSON iteration statistics, not Prometheus text"
    try:
        return parse_metrics(text), None
    except (ValueError, KeyError) as e:
        return None, f"unreadable Prometheus text: {e}"


def adapters(url: str, api_key: str | None, timeout: float = 3.0) -> tuple[str, ...]:
    """The LoRA adapters the endpoint's /v1/models lists (both engines give each its base model as parent);
    () when it lists none or answers nothing readable."""
    code, text = probe.get(probe.base_url(url) + "/v1/models", timeout, api_key)
    try:
        data = json.loads(text).get("data") if code == 200 else None
    except (ValueError, AttributeError, RecursionError):
        return ()
    if not isinstance(data, list):
        return ()
    return tuple(str(m["id"])[:128] for m in data if isinstance(m, dict) and m.get("parent") and "id" in m)


def endpoint_status(url: str, timeout: float = 3.0, api_key: str | None = None) -> EndpointStatus:
    """Probe one endpoint's /health, /metrics (with the key: an auth proxy guards /metrics) and adapters."""
    healthy = probe.healthy(url, timeout)
    served = adapters(url, api_key, timeout)
    code, text = probe.get(probe.base_url(url) + "/metrics", timeout, api_key)
    if code != 200:
        return EndpointStatus(url, healthy, error=f"GET /metrics answered {code or 'nothing'}", adapters=served)
    metrics, error = read_text(text)
    return EndpointStatus(url, healthy, metrics, error, served)


def replica_status(reads: list) -> list[ReplicaStatus]:
    """Each MetricsRead (infra.targets.contract) as metrics or the reason it has none."""
    out = []
    for r in reads:
        metrics, error = read_text(r.text) if r.text is not None else (None, r.error)
        out.append(ReplicaStatus(r.source, metrics, error, r.at_zero))
    return out


def stack_status(stack, urls: list[str], api_key: str | None) -> tuple[list[EndpointStatus], list[ReplicaStatus]]:
    """Each endpoint's health, and each replica's metrics from inside where the target reads them there (the
    gateway refuses /metrics to the internet); else each endpoint's metrics through it."""
    from infra.lifecycle.secrets import resolver
    from infra.targets.registry import target_for

    reads = target_for(stack.deployment.target.kind).engine_metrics(stack, resolver(stack))
    if reads is None:
        return [endpoint_status(url, api_key=api_key) for url in urls], []
    return [EndpointStatus(url, probe.healthy(url, 3.0), adapters=adapters(url, api_key)) for url in urls], \
        replica_status(reads)


def status_json(results: list[EndpointStatus], hosts: list[str],
                replicas: list[ReplicaStatus] | None = None) -> dict:
    """`inferry status --json`: every endpoint with its metrics (null when unread or read from inside), each
    replica's metrics read from inside, and the host lines."""
    from dataclasses import asdict

    return {"endpoints": [asdict(r) for r in results], "replicas": [asdict(r) for r in replicas or []],
            "hosts": hosts, "healthy": all(r.healthy for r in results),
            "at_zero": any(r.at_zero for r in replicas or [])}


def host_status(stack) -> list[str]:
    """The target's lines about its machines (SSH: each host's engine and its restarts since the last apply)."""
    from infra.lifecycle.secrets import resolver
    from infra.targets.registry import target_for

    return target_for(stack.deployment.target.kind).host_status(stack, resolver(stack))
