"""The stand-in engine's Prometheus metrics, under vLLM's names and labels (text format 0.0.4, stdlib only).

Names, help texts and TTFT buckets follow vLLM v1's PrometheusStatLogger (vllm/v1/metrics/loggers.py):
labels model_name and engine, counters exposed as *_total, no *_created series.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                   240.0, 480.0, 960.0, 1920.0, 7680.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0)
GAUGES = {
    "vllm:num_requests_running": "Number of requests in model execution batches.",
    "vllm:num_requests_waiting": "Number of requests waiting to be processed.",
    "vllm:kv_cache_usage_perc": "KV-cache usage. 1 means 100 percent usage.",
}
COUNTERS = {
    "vllm:prompt_tokens_total": "Number of prefill tokens processed.",
    "vllm:generation_tokens_total": "Number of generation tokens processed.",
    "vllm:num_preemptions_total": "Cumulative number of preemption from the engine.",
    "vllm:prefix_cache_queries_total": "Prefix cache queries, in terms of number of queried tokens.",
    "vllm:prefix_cache_hits_total": "Prefix cache hits, in terms of number of cached tokens.",
}
HISTOGRAMS = {
    "vllm:time_to_first_token_seconds": ("Histogram of time to first token in seconds.", TTFT_BUCKETS),
    "vllm:inter_token_latency_seconds": ("Histogram of inter-token latency in seconds.", ITL_BUCKETS),
    "vllm:e2e_request_latency_seconds": ("Histogram of e2e request latency in seconds.", LATENCY_BUCKETS),
    "vllm:request_queue_time_seconds": ("Histogram of time spent in WAITING phase for request.",
                                        LATENCY_BUCKETS),
}


@dataclass
class _Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def observe(self, value: float) -> None:
        if not self.counts:
            self.counts = [0] * len(self.buckets)
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1
        self.total += value
        self.n += 1


class Metrics:
    """Thread-safe counters and histograms of one served model."""

    def __init__(self, model_name: str):
        self.labels = f'engine="0",model_name="{model_name}"'
        self._lock = threading.Lock()
        self.gauges = {name: 0.0 for name in GAUGES}
        self.counters = {name: 0.0 for name in COUNTERS}
        self.histograms = {name: _Histogram(b) for name, (_, b) in HISTOGRAMS.items()}
        self.success = {"stop": 0.0, "length": 0.0, "abort": 0.0}

    def queued(self) -> None:
        """A request arrived and waits for a place in the running batch."""
        with self._lock:
            self.gauges["vllm:num_requests_waiting"] += 1

    def started(self, waited_s: float) -> None:
        """A queued request entered the running batch after waiting waited_s."""
        with self._lock:
            self.gauges["vllm:num_requests_waiting"] -= 1
            self.histograms["vllm:request_queue_time_seconds"].observe(waited_s)
            self.gauges["vllm:num_requests_running"] += 1
            self.gauges["vllm:kv_cache_usage_perc"] = min(1.0, self.gauges["vllm:num_requests_running"] / 100)

    def finished(self, prompt_tokens: int, output_tokens: int, ttft: float, e2e: float, reason: str) -> None:
        """A request left the batch: count its tokens and latencies."""
        with self._lock:
            self.gauges["vllm:num_requests_running"] -= 1
            self.gauges["vllm:kv_cache_usage_perc"] = min(1.0, self.gauges["vllm:num_requests_running"] / 100)
            self.counters["vllm:prompt_tokens_total"] += prompt_tokens
            self.counters["vllm:generation_tokens_total"] += output_tokens
            self.counters["vllm:prefix_cache_queries_total"] += prompt_tokens
            self.histograms["vllm:time_to_first_token_seconds"].observe(ttft)
            self.histograms["vllm:e2e_request_latency_seconds"].observe(e2e)
            if output_tokens > 1:
                self.histograms["vllm:inter_token_latency_seconds"].observe((e2e - ttft) / (output_tokens - 1))
            self.success[reason] = self.success.get(reason, 0.0) + 1

    def render(self) -> str:
        """The /metrics body."""
        lines: list[str] = []
        with self._lock:
            for name, help_text in GAUGES.items():
                lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge",
                          f"{name}{{{self.labels}}} {self.gauges[name]!r}"]
            for name, help_text in COUNTERS.items():
                lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter",
                          f"{name}{{{self.labels}}} {self.counters[name]!r}"]
            lines += ["# HELP vllm:request_success_total Count of successfully processed requests.",
                      "# TYPE vllm:request_success_total counter"]
            lines += [f'vllm:request_success_total{{{self.labels},finished_reason="{r}"}} {v!r}'
                      for r, v in self.success.items()]
            for name, (help_text, buckets) in HISTOGRAMS.items():
                lines += self._histogram_lines(name, help_text, self.histograms[name])
        return "\n".join(lines) + "\n"

    def _histogram_lines(self, name: str, help_text: str, h: _Histogram) -> list[str]:
        counts = h.counts or [0] * len(h.buckets)
        lines = [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
        lines += [f'{name}_bucket{{{self.labels},le="{b!r}"}} {float(c)!r}' for b, c in zip(h.buckets, counts)]
        lines += [f'{name}_bucket{{{self.labels},le="+Inf"}} {float(h.n)!r}',
                  f"{name}_count{{{self.labels}}} {float(h.n)!r}", f"{name}_sum{{{self.labels}}} {h.total!r}"]
        return lines
