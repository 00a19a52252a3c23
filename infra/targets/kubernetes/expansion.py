"""Kubernetes' own interpolation, undone: values reach the container's process exactly as the stack wrote them."""
from __future__ import annotations

from typing import Any


def literal(value: str) -> str:
    """Kubernetes expands `$(VAR)` in a container's command, args and env values and reads `$$` as `$`
    (k8s.io/kubernetes third_party/forked/golang/expansion): doubling every `$` makes it expand to the text.
    Without it, `--chat-template /tmp/$(VLLM_API_KEY)` would put the API key on the engine's command line."""
    return value.replace("$", "$$")


def literal_containers(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod spec with every container's command, args and env values made literal (in place)."""
    for c in pod.get("initContainers", []) + pod.get("containers", []):
        for key in ("command", "args"):
            if key in c:
                c[key] = [literal(str(x)) for x in c[key]]
        for e in c.get("env", []):
            if isinstance(e.get("value"), str):
                e["value"] = literal(e["value"])
    return pod
