"""The engine kinds the stack schema accepts, listed once on the ground floor.

stack/ sits below engines/ and cannot ask the engine registry (infra/engines/registry.py); the schema's
discriminated union, the error messages and `inferry init` read this list instead, and
tests/engines/test_engine_contract.py checks that it, the union's tags and the registry agree.
"""
from __future__ import annotations

ENGINE_KINDS: tuple[str, ...] = ("vllm", "tensorrt-llm")
