"""Who the deployment's data or downloads reach: the provider, the store, and each source fetched at run time."""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from infra.errors import Problem
from infra.stack.config import Deployment

HUB = "huggingface.co"


@dataclass(frozen=True)
class SubProcessor:
    """One party outside the user's own machines that the deployment's data or downloads reach."""

    name: str  # how policy.sub_processors names it: the provider's name, or a host
    role: str  # compute | weight store | run-time download
    detail: str  # what it does for the deployment, for the record
    field: str  # the stack field that brings it in


def image_registry(image: str) -> str:
    """The registry host an image reference pulls from (Docker's rules: no dot, colon or localhost: Docker Hub)."""
    first, sep, _ = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def source_host(where: str) -> str:
    """The host a Source downloads from."""
    return urlsplit(where).hostname or "" if "://" in where else image_registry(where)


def sub_processors(d: Deployment) -> list[SubProcessor]:
    """Every sub-processor of the deployment, each once (the first field that brings it in)."""
    from infra.engines.common import uses_hub
    from infra.targets.registry import target_for

    found = [SubProcessor(d.provider.name, "compute", f"runs inference in {d.provider.region} "
                          f"({d.provider.gpu_count} x {d.provider.gpu_name} per replica)", "provider.name"),
             SubProcessor(urlsplit(d.storage.endpoint).hostname or d.storage.endpoint, "weight store",
                          f"holds the model's weights in bucket {d.storage.bucket} ({d.storage.region})",
                          "storage.endpoint")]
    for s in target_for(d.target.kind).run_time_sources(d):
        found.append(SubProcessor(source_host(s.where), "run-time download", f"{s.what}: {s.where}", s.field))
    if uses_hub(d):
        found.append(SubProcessor(HUB, "run-time download", "the Hugging Face hub: tokenizer or draft files",
                                  "model.hf_token" if d.model.hf_token else "engine.speculative.model"))
    seen: dict[str, SubProcessor] = {}
    for s in found:
        seen.setdefault(s.name, s)
    return list(seen.values())


def check_sub_processors(d: Deployment) -> list[Problem]:
    """With policy.sub_processors, every sub-processor must be on it."""
    allowed = d.policy.sub_processors
    if allowed is None:
        return []
    return [Problem(s.field, f"reaches {s.name} ({s.role}: {s.detail}), which policy.sub_processors does not list",
                    hint=f"add {s.name!r} to policy.sub_processors if your agreements cover it, or change "
                    f"{s.field}")
            for s in sub_processors(d) if s.name not in allowed]
