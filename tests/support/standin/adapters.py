"""The LoRA adapters a stand-in engine serves, read from its command line as the real engine reads them, and
listed in /v1/models as its serving code lists them (vLLM 0.33 entrypoints/openai/models/serving.py
OpenAIServingModels.show_available_models; SGLang 0.5.23 entrypoints/http_server.py available_models)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CONFIG = "adapter_config.json"


def _entry(text: str, engine: str) -> tuple[str, str, str | None]:
    """(name, path, base model name) of one --lora-modules (vLLM) or --lora-paths (SGLang) value."""
    if text.lstrip().startswith("{"):
        d = json.loads(text)
        if engine == "vllm":  # LoRAParserAction: the JSON form's name, path and optional base_model_name
            return d["name"], d["path"], d.get("base_model_name")
        return d["lora_name"], d["lora_path"], None
    name, eq, path = text.partition("=")
    return (name, path, None) if eq else (text, text, None)  # SGLang: a bare path is its own name


def adapters(engine: str, ns: Any) -> tuple[tuple[str, str, str | None], ...]:
    """Every adapter the parsed command line loads at start-up (none without LoRA on)."""
    values = getattr(ns, "lora_modules", None) if engine == "vllm" else getattr(ns, "lora_paths", None)
    if not values or not getattr(ns, "enable_lora", None) and engine == "vllm":
        return ()
    return tuple(_entry(v, engine) for v in values)


def missing(found: tuple[tuple[str, str, str | None], ...]) -> str | None:
    """The first adapter whose folder has no adapter_config.json (both engines fail their start-up on it)."""
    for name, path, _ in found:
        if not (Path(path) / CONFIG).is_file():
            return f"Loading lora {name} failed: No adapter found for {path}"
    return None


def cards(engine: str, found: tuple[tuple[str, str, str | None], ...], served: str, created: int,
          permission: list[dict]) -> list[dict]:
    """The adapters' /v1/models entries: id the name, root the path, parent the base model."""
    if engine == "sglang":
        return [{"id": n, "object": "model", "created": created, "owned_by": "sglang", "root": p, "parent": served,
                 "max_model_len": None} for n, p, _ in found]
    return [{"id": n, "object": "model", "created": created, "owned_by": "vllm", "root": p, "parent": base or served,
             "max_model_len": None, "permission": permission} for n, p, base in found]
