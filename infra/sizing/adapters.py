"""Each LoRA adapter's adapter_config.json, read from the store and checked before anything is deployed: a LoRA
adapter (PEFT's peft_type), of the rank the stack says, trained on the model the stack serves."""
from __future__ import annotations

import json
from collections.abc import Callable

from infra.errors import Problem
from infra.sizing.catalog import find_model
from infra.sizing.modelinfo import Reader
from infra.stack.config import Deployment

CONFIG = "adapter_config.json"  # PEFT's file: r, base_model_name_or_path, target_modules, peft_type
MAX_BYTES = 1 << 20  # an adapter_config.json is a few hundred bytes: more is not one


def served_names(d: Deployment) -> set[str]:
    """Every name the served model goes by, lower-case, with each name's last path part: model.name, model.catalog,
    and the catalog's key, Hugging Face id and aliases for it."""
    names = {d.model.name, d.model.catalog or ""}
    arch = find_model(d.model.catalog or d.model.name)
    if arch is not None:
        names |= {arch.key, arch.hf_id or "", *arch.aliases}
    return {form for n in names if n for form in (n.lower(), n.lower().rstrip("/").rsplit("/", 1)[-1])}


def adapter_store_problems(d: Deployment, reader: Callable[[str], Reader]) -> list[Problem]:
    """What each adapter's adapter_config.json in the store says against the stack; reader(prefix) reads the
    adapter's folder (None for a file that is not there)."""
    problems = []
    for i, a in enumerate(d.model.adapters):
        where = f"model.adapters[{i}]"
        raw = reader(a.weights)(CONFIG)
        conf = _parse(raw)
        if raw is None:
            problems.append(Problem(f"{where}.weights", f"adapter {a.name!r}: s3://{d.storage.bucket}/{a.weights}/"
                                    f"{CONFIG} is not in the store", hint=f"push the adapter's folder: inferry "
                                    f"weights push FOLDER --prefix {a.weights} --stack STACK"))
        elif conf is None:
            problems.append(Problem(f"{where}.weights", f"adapter {a.name!r}: its {CONFIG} is not a JSON object",
                                    hint="push the folder PEFT saved (save_pretrained writes adapter_config.json)"))
        else:
            problems += _config_problems(d, i, conf)
    return problems


def _parse(raw: bytes | None) -> dict | None:
    if raw is None or len(raw) > MAX_BYTES:
        return None
    try:
        conf = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return conf if isinstance(conf, dict) else None


def _config_problems(d: Deployment, i: int, conf: dict) -> list[Problem]:
    a, where = d.model.adapters[i], f"model.adapters[{i}]"
    kind = conf.get("peft_type", "LORA")
    if kind != "LORA":
        return [Problem(where, f"adapter {a.name!r} is a {str(kind)[:40]!r} adapter, not LoRA",
                        hint="serve LoRA adapters only: the engines load no other PEFT type")]
    problems = []
    rank = conf.get("r")
    if not isinstance(rank, int) or isinstance(rank, bool) or rank <= 0:
        problems.append(Problem(where, f"adapter {a.name!r}: its {CONFIG} has no rank r",
                                hint="push the folder PEFT saved (save_pretrained writes r)"))
    elif rank != a.rank:
        problems.append(Problem(f"{where}.rank", f"adapter {a.name!r} has rank {rank} in its {CONFIG}, the stack "
                                f"says {a.rank}", hint=f"set model.adapters[{i}].rank: {rank}"))
    base = conf.get("base_model_name_or_path")
    if isinstance(base, str) and base.strip():
        bare = base.lower().rstrip("/").rsplit("/", 1)[-1]
        if base.lower() not in served_names(d) and bare not in served_names(d):
            problems.append(Problem(where, f"adapter {a.name!r} was trained on {base[:200]!r}, but the model served "
                                    f"is {d.model.name!r} (model.name)", hint="serve the adapter on the model it "
                                    "was trained on, or remove it from model.adapters"))
    return problems
