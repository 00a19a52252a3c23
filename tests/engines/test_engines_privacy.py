"""Privacy defaults of every engine: usage statistics and hub telemetry off, the hub offline when weights come
from the store, and prompt logging only when the stack asks for it (serving.log_prompts)."""
from __future__ import annotations

import pytest

from infra.engines import service_spec
from infra.engines.checks import prompt_logging_problems
from infra.engines.registry import engine_for
from infra.stack.validate import findings
from tests.engines.test_engines import BASE, deployment

OFF = {"DO_NOT_TRACK": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_OFFLINE": "1"}
# What each engine's own source names as its switch (docs/security.md); the contract must carry the same.
OWN = {"vllm": {"VLLM_NO_USAGE_STATS", "VLLM_DO_NOT_TRACK"}, "tensorrt-llm": {"TRTLLM_NO_USAGE_STATS", "TELEMETRY_DISABLED"},
       "sglang": set()}


def env(d) -> dict[str, str | None]:
    """The engine's plain environment, by name (secrets by reference: None)."""
    return {e.name: e.value for e in service_spec(d).env}


@pytest.mark.parametrize("kind", sorted(OWN))
def test_every_engine_starts_with_its_usage_reports_off(kind):
    assert set(engine_for(kind).usage_off) == OWN[kind]
    got = env(deployment({"kind": kind}))
    want = {**OFF, **{k: "1" for k in OWN[kind]}}
    assert {k: got.get(k) for k in want} == want


def test_the_hub_stays_reachable_only_when_the_engine_downloads_from_it():
    token = {"env": "HF_TOKEN_VAR"}
    assert "HF_HUB_OFFLINE" not in env(deployment({"kind": "vllm"}, model={**BASE["model"], "hf_token": token}))
    hub_draft = {"kind": "vllm", "speculative": {"method": "draft_model", "num_speculative_tokens": 2,
                                                 "model": "meta-llama/Llama-3.2-1B-Instruct"}}
    assert "HF_HUB_OFFLINE" not in env(deployment(hub_draft))
    store_draft = {**hub_draft, "speculative": {**hub_draft["speculative"], "model": "s3://inferry-weights/draft"}}
    assert env(deployment(store_draft))["HF_HUB_OFFLINE"] == "1"


@pytest.mark.parametrize("kind,extra,flag", [
    ("vllm", ["--enable-log-requests"], "--enable-log-requests"),
    ("vllm", ["--enable-log-requests", "--enable-log-outputs"], "--enable-log-outputs"),
    ("sglang", ["--log-requests", "--log-requests-level", "3"], "--log-requests"),
])
def test_options_that_log_prompts_need_serving_log_prompts(kind, extra, flag):
    d = deployment({"kind": kind, "extra_args": extra})
    found = [p for p in findings(d) if p.path == "engine.extra_args" and "logs prompts" in p.message]
    assert flag in {p.message.split()[0] for p in found} and all(p.severity == "error" for p in found)
    assert "serving.log_prompts: true" in found[0].hint
    allowed = deployment({"kind": kind, "extra_args": extra}, serving={**BASE["serving"], "log_prompts": True})
    assert prompt_logging_problems(allowed) == []  # the printed fix, applied


def test_turning_prompt_logs_off_is_not_refused():
    assert prompt_logging_problems(deployment({"kind": "vllm", "extra_args": ["--disable-log-requests"]})) == []
    assert prompt_logging_problems(deployment({"kind": "vllm", "extra_args": ["--max-log-len", "10"]})) == []
