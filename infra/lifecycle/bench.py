"""`inferry bench` for a stack: find its endpoint, run the load, write JSON, record the measured tokens/s."""
from __future__ import annotations

import json
from pathlib import Path

from infra.errors import InferryError
from infra.lifecycle.deployer import Deployer, endpoints
from infra.lifecycle.loadgen import BenchReport, LoadSpec, run_load
from infra.secrets import resolve
from infra.lifecycle.journal import inferry_dir
from infra.stackfile import Stack


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
    t = stack.deployment.target
    if t.kind == "kubernetes":
        return max(t.replicas, 1)
    return len(t.hosts) if t.load_balancer else 1


def _writable(path: Path) -> None:
    """Create the report's folder; InferryError when path cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            raise IsADirectoryError(21, "Is a directory", str(path))
    except OSError as e:
        raise InferryError(f"cannot write the report to {e.filename or path}: {e.strerror}",
                           "pass --json a file path in a writable folder", where="--json") from None


def run_bench(stack: Stack, deployer: Deployer, spec_args: dict, json_out: Path | None) -> list[str]:
    """Bench the stack's first endpoint (the load balancer when there is one); returns the printed lines."""
    spec = LoadSpec(**spec_args, exact_length=stack.deployment.engine.kind == "vllm")
    url = endpoints(deployer.outputs(stack), stack.name)[0]
    key = resolve(stack.deployment.serving.api_key, stack.name, "serving.api_key", stack.path)
    path = json_out or inferry_dir() / "bench" / f"{stack.name}.json"
    _writable(path)  # before the load: a run is not thrown away for want of a folder
    report = run_load(url, key, stack.deployment.model.name, spec)
    path.write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    lines = report_lines(report) + [f"  report: {path}"]
    if not report.completed:
        first = report.error_samples[0] if report.error_samples else "no answer"
        raise InferryError(f"none of {spec.requests} request(s) completed ({first}); report: {path}",
                           f"check the endpoint with `inferry status {stack.name}` and serving.api_key", where=url)
    if report.completed and not report.errors:
        from infra.measurements import record_measured_tps

        n = replicas_behind(stack)
        per_replica = report.output_tokens_per_s / n
        record_measured_tps(stack.name, per_replica,
                            {"endpoint": url, "replicas": n, "requests": spec.requests,
                             "concurrency": spec.concurrency, "prompt_tokens": spec.prompt_tokens,
                             "output_tokens": spec.output_tokens, "ttft_p50_ms": report.ttft_ms.p50,
                             "itl_p50_ms": report.itl_ms.p50, "report": str(path)})
        lines.append(f"  recorded {per_replica:.1f} output tokens/s per replica ({n} behind the endpoint) for "
                     f"{stack.name}: `inferry plan {stack.name}` prices from it")
    else:
        lines.append("  not recorded: a run with errors does not measure the engine")
    return lines
