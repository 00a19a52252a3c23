"""`inferry bench`: a bounded concurrent load of streamed chat completions; TTFT, ITL, tokens/s, errors."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

from infra.errors import InferryError
from infra.lifecycle.probe import base_url


@dataclass(frozen=True)
class LoadSpec:
    """The shape of the load."""

    requests: int = 64
    concurrency: int = 8
    prompt_tokens: int = 256
    output_tokens: int = 128
    timeout_s: float = 300.0
    exact_length: bool = True  # vLLM's ignore_eos/min_tokens: every request yields output_tokens

    def __post_init__(self) -> None:
        if min(self.requests, self.concurrency, self.prompt_tokens, self.output_tokens) < 1:
            raise InferryError("requests, concurrency, prompt and output lengths must be at least 1",
                               "pass positive values", where="bench")


@dataclass
class RequestResult:
    """One request's timings (seconds)."""

    ok: bool
    ttft: float | None = None
    itl: list[float] = field(default_factory=list)
    output_tokens: int = 0
    latency: float = 0.0
    error: str | None = None


@dataclass(frozen=True)
class Percentiles:
    """p50/p90/p99 in milliseconds."""

    p50: float | None
    p90: float | None
    p99: float | None

    @classmethod
    def of(cls, seconds: list[float]) -> Percentiles:
        """From samples in seconds."""
        return cls(*(None if not seconds else round(percentile(seconds, q) * 1000, 2) for q in (0.5, 0.9, 0.99)))


@dataclass(frozen=True)
class BenchReport:
    """What `inferry bench` prints and writes as JSON."""

    endpoint: str
    model: str
    spec: LoadSpec
    completed: int
    errors: int
    duration_s: float
    output_tokens: int
    output_tokens_per_s: float
    ttft_ms: Percentiles
    itl_ms: Percentiles
    error_samples: list[str]

    def to_dict(self) -> dict:
        """JSON-ready."""
        return asdict(self)


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..1) of non-empty samples."""
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _prompt(tokens: int, i: int) -> str:
    # About one token per short word; the index keeps prompts distinct so a prefix cache cannot serve them all.
    return f"request {i}: " + " ".join(["hello"] * max(tokens - 3, 1))


def _one(client, model: str, spec: LoadSpec, i: int) -> RequestResult:
    start = time.perf_counter()
    last = None
    r = RequestResult(ok=False)
    chunks = 0
    try:
        stream = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": _prompt(spec.prompt_tokens, i)}],
            max_tokens=spec.output_tokens, stream=True, stream_options={"include_usage": True},
            # vLLM's sampling extras (docs: openai_compatible_server, extra parameters): exact lengths compare.
            extra_body={"ignore_eos": True, "min_tokens": spec.output_tokens} if spec.exact_length else None)
        for chunk in stream:
            if chunk.usage is not None:
                r.output_tokens = chunk.usage.completion_tokens
            if not chunk.choices or not chunk.choices[0].delta.content:
                continue
            now = time.perf_counter()
            if last is None:
                r.ttft = now - start
            else:
                r.itl.append(now - last)
            last, chunks = now, chunks + 1
        r.output_tokens = r.output_tokens or chunks
        r.ok = r.ttft is not None
        r.error = None if r.ok else "stream ended without any content"
    except Exception as e:  # noqa: BLE001 - every failure of one request is counted, none stops the run
        r.error = f"{type(e).__name__}: {str(e)[:160]}"
    r.latency = time.perf_counter() - start
    return r


def run_load(endpoint: str, api_key: str, model: str, spec: LoadSpec) -> BenchReport:
    """Send spec.requests streamed chat completions, at most spec.concurrency at a time."""
    import openai

    client = openai.OpenAI(base_url=base_url(endpoint) + "/v1", api_key=api_key, max_retries=0,
                           timeout=spec.timeout_s)
    lock = threading.Lock()
    results: list[RequestResult] = []

    def task(i: int) -> None:
        r = _one(client, model, spec, i)
        with lock:
            results.append(r)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=spec.concurrency, thread_name_prefix="bench") as pool:
        list(pool.map(task, range(spec.requests)))
    duration = time.perf_counter() - start
    ok = [r for r in results if r.ok]
    tokens = sum(r.output_tokens for r in ok)
    return BenchReport(
        endpoint=endpoint, model=model, spec=spec, completed=len(ok), errors=len(results) - len(ok),
        duration_s=round(duration, 3), output_tokens=tokens,
        output_tokens_per_s=round(tokens / duration, 2) if duration > 0 else 0.0,
        ttft_ms=Percentiles.of([r.ttft for r in ok if r.ttft is not None]),
        itl_ms=Percentiles.of([x for r in ok for x in r.itl]),
        error_samples=sorted({r.error for r in results if r.error})[:5])
