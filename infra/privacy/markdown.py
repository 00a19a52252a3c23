"""The record of processing as Markdown a reviewer reads (and can quote)."""
from __future__ import annotations

from infra.privacy.record import Record
from infra.targets.contract import ReplicaFacts


def _replica(f: ReplicaFacts) -> list[str]:
    place = ", ".join(f"{k} {v}" for k, v in f.place.items())
    if f.error:
        return [f"- **{f.source}** ({place}): not read: {f.error}"]
    gpus = ", ".join(f"{n} x {g}" for g, n in _counted(f.gpus)) or "none reported"
    return [f"- **{f.source}** ({place}): GPUs {gpus}",
            f"  - telemetry switches in the running engine: {_pairs(f.env) or 'none'}",
            f"  - listening beyond loopback: {', '.join(f.listening) or 'nothing read'}",
            f"  - data kept there: {', '.join(f.data) or 'none'}"]


def _counted(items: tuple[str, ...]) -> list[tuple[str, int]]:
    return [(x, items.count(x)) for x in dict.fromkeys(items)]


def _pairs(env) -> str:
    return ", ".join(f"`{k}={v}`" for k, v in sorted(env.items()))


def record_markdown(r: Record) -> str:
    """The whole record, in the order a processing record (GDPR art. 30) is read."""
    d = r.door
    keys = {k: when for f in r.replicas for k, when in f.keys.items()}
    lines = [f"# Record of processing: {r.stack}", "", f"Read from the running deployment at {r.read_at}.", "",
             "## Where inference runs", "",
             f"Provider {r.provider}, region {r.region}, {r.target}"
             + (f"; policy.residency: {r.residency}." if r.residency else "."), ""]
    for f in r.replicas:
        lines += _replica(f)
    lines += ["", "## Where weights and logs live", "",
              f"- weights: bucket `{r.store['bucket']}` ({r.store['weights']}) at {r.store['endpoint']}, "
              f"region {r.store['region']}; copied to each replica's disk",
              f"- gateway access log: {d.access_log}, kept {d.access_log_days} days; method, path without query, "
              "status, size, latency and a key id per request, never bodies, queries, keys or client addresses"
              if d.access_log else "- gateway access log: none (no gateway)",
              "", "## Data flow", "",
              f"client -> {d.url} (TLS: {d.tls}) -> the engines: {d.to_engine}.", "",
              "What leaves the deployment: prompts and outputs go back to the client only. The engines run with "
              f"{_pairs(r.telemetry_off)}, read back from each running engine above.", "",
              "## Retention", "",
              ("- prompts and outputs: **logged by the engine** (serving.log_prompts: true)" if r.log_prompts else
               "- prompts and outputs: not kept after the response (serving.log_prompts: false; the engine's "
               f"options that would log them, {', '.join(r.prompt_flags) or 'none'}, are refused)"),
              f"- access log: {d.access_log_days} days" if d.access_log else "- access log: none",
              "", "## Sub-processors", "", "| name | role | what for | brought in by |", "|---|---|---|---|"]
    lines += [f"| {s.name} | {s.role} | {s.detail} | `{s.field}` |" for s in r.sub_processors]
    allowed = r.allowed_sub_processors
    lines += ["", f"policy.sub_processors: {', '.join(allowed) if allowed else '(none listed)'}" if allowed is not None
              else "policy.sub_processors: not set (no allowlist)",
              "", "## Who can call it", "",
              f"- the door: {d.url}, public ports {', '.join(map(str, d.public_ports)) or 'none'}",
              f"- client keys accepted: {d.keys} in the stack" + ("; the gateway accepts:" if keys else ""),
              *(f"  - key {k}, first accepted {when or '(date not recorded)'}" for k, when in sorted(keys.items())),
              ""]
    return "\n".join(lines)
