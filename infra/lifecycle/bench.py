"""`inferry bench` for a stack: find its endpoint, run the load, write JSON, record the measured tokens/s."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from infra.errors import InferryError
from infra.engines.registry import engine_for
from infra.lifecycle.deployer import Deployer, endpoints
from infra.lifecycle.loadgen import BenchReport, LoadSpec, run_load
from infra.lifecycle.journal import inferry_dir
from infra.stack.stackfile import Stack


def _ms(p) -> str:
    return "n/a" if p.p50 is None else f"p50 {p.p50:.1f} / p90 {p.p90:.1f} / p99 {p.p99:.1f} ms"


def report_lines(r: BenchReport) -> list[str]:
    """How the report prints."""
    s = r.spec
    return [f"{r.endpoint}  {r.model}: {s.requests} requests, concurrency {s.concurrency}, "
            f"~{s.prompt_tokens} prompt / {s.output_tokens} output tokens",
            f"  completed {r.completed}, errors {r.errors}, {r.duration_s:.1f}s",
            f"  output tokens/s: {r.output_tokens_per_s:.1f}",
            f"  time to first token: {_ms(r.ttft_ms)}",
            f"  inter-token latency: {_ms(r.itl_ms)}"] + [f"  error: {e}" for e in r.error_samples]


def replicas_behind(stack: Stack) -> int:
    """How many engine replicas serve the stack's first endpoint (a load balancer spreads over all hosts)."""
    from infra.targets.registry import target_for

    d = stack.deployment
    return target_for(d.target.kind).replicas_behind(d)


def _writable(path: Path) -> None:
    """Create the report's folder; InferryError when path cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            raise IsADirectoryError(21, "Is a directory", str(path))
    except OSError as e:
        raise InferryError(f"cannot write the report to {e.filename or path}: {e.strerror}",
                           "pass --report a file path in a writable folder", where="--report") from None


@dataclass(frozen=True)
class BenchTarget:
    """What to load: the URL, its key, the model name, and the stack it measures (None: an --endpoint alone)."""

    url: str
    key: str
    model: str
    stack: Stack | None = None

    @property
    def name(self) -> str:
        """The report's name: the stack's, else the endpoint's host and port."""
        return self.stack.name if self.stack else re.sub(r"[^A-Za-z0-9.-]+", "_", self.url.split("://", 1)[-1])


def target_of(stack: Stack | None, deployer: Deployer | None, endpoint: str | None, key_env: str) -> BenchTarget:
    """The stack's first endpoint (the load balancer when there is one), or --endpoint with its key and model."""
    from infra.lifecycle.direct import api_key, checked_urls, served_model

    if endpoint:
        url = checked_urls([endpoint])[0]
    elif stack is None or deployer is None:
        raise InferryError("no stack or endpoint given", "pass STACK, or --endpoint URL", where="bench")
    else:
        url = endpoints(deployer.outputs(stack), stack.name)[0]
    key = api_key(stack, key_env, required=True) or ""
    model = stack.deployment.model.name if stack else served_model(url, key)
    return BenchTarget(url, key, model, stack)


def run_bench(t: BenchTarget, spec_args: dict, report_path: Path | None) -> tuple[dict, list[str]]:
    """Bench one endpoint; returns (the report, the printed lines). With a stack, records tokens/s for plan."""
    exact = t.stack is not None and engine_for(t.stack.deployment.engine.kind).exact_output_length
    spec = LoadSpec(**spec_args, exact_length=exact)
    path = report_path or inferry_dir() / "bench" / f"{t.name}.json"
    _writable(path)  # before the load: a run is not thrown away for want of a folder
    report = run_load(t.url, t.key, t.model, spec)
    path.write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    lines = report_lines(report) + [f"  report: {path}"]
    if not report.completed:
        first = report.error_samples[0] if report.error_samples else "no answer"
        check = f"inferry status {t.stack.name}" if t.stack else f"inferry status --endpoint {t.url}"
        raise InferryError(f"none of {spec.requests} request(s) completed ({first}); report: {path}",
                           f"check the endpoint with `{check}` and the API key", where=t.url)
    if t.stack is None:
        lines.append("  not recorded: no stack named (pass STACK to record tokens/s for `inferry plan`)")
    elif not report.errors:
        lines.append(_record(t.stack, t.url, spec, report, path))
    else:
        lines.append("  not recorded: a run with errors does not measure the engine")
    return report.to_dict(), lines


def _record(stack: Stack, url: str, spec: LoadSpec, report: BenchReport, path: Path) -> str:
    from infra.sizing.measurements import record_measured_tps

    n = replicas_behind(stack)
    per_replica = report.output_tokens_per_s / n
    record_measured_tps(stack.name, per_replica,
                        {"endpoint": url, "replicas": n, "requests": spec.requests,
                         "concurrency": spec.concurrency, "prompt_tokens": spec.prompt_tokens,
                         "output_tokens": spec.output_tokens, "ttft_p50_ms": report.ttft_ms.p50,
                         "itl_p50_ms": report.itl_ms.p50, "report": str(path)})
    return (f"  recorded {per_replica:.1f} output tokens/s per replica ({n} behind the endpoint) for "
            f"{stack.name}: `inferry plan {stack.name}` prices from it")
