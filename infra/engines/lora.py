"""LoRA adapters as the engines take them: where each appears beside the model, the rank limit, the one owner."""
from __future__ import annotations

from infra.engines.common import weights_dir
from infra.engines.spec import MODELS_DIR
from infra.stack.config import Deployment
from infra.stack.location import WeightsLocation


def adapter_weights(d: Deployment, models_dir: str = MODELS_DIR) -> tuple[tuple[str, str], ...]:
    """(s3:// source, engine path) of each adapter: fetched and verified like the model, beside it."""
    uris = [WeightsLocation(d.storage.bucket, a.weights).uri for a in d.model.adapters]
    return tuple((uri, weights_dir(uri, models_dir)) for uri in uris)


def rank_limit(d: Deployment, accepted: tuple[int, ...] | None) -> int:
    """The engine's --max-lora-rank: the largest adapter's rank, raised to the next limit the engine's parser
    accepts (vLLM takes only some values; an adapter of rank 4 loads under a limit of 8), never more."""
    top = max(a.rank for a in d.model.adapters)
    if accepted is None:
        return top
    # None so large: the engine's largest, and validate names the adapter that needs more (adapter_problems)
    return min((r for r in accepted if r >= top), default=max(accepted))


def choices(snapshot: dict, dest: str) -> tuple[int, ...] | None:
    """The integer choices the snapshot's parser gives an option, sorted; None when it takes any value."""
    for o in snapshot["options"]:
        if o["dest"] == dest:
            return tuple(sorted(int(c) for c in o["choices"])) if o.get("choices") else None
    return None

