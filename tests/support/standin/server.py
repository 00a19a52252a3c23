"""The stand-in engine's HTTP API, shaped like vLLM's OpenAI server (stdlib http.server only).

Auth as vLLM's AuthenticationMiddleware (vllm/entrypoints/openai/server_utils.py): with API keys set, paths
starting with /v1 need `Authorization: Bearer KEY` (else 401 {"error": "Unauthorized"}); /health, /metrics,
/version stay open; OPTIONS is never checked.
"""
from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.standin import adapters as lora
from tests.support.standin.argv import EngineArgs
from tests.support.standin.metrics import Metrics


class State:
    """What the handlers share: the parsed command line, health, metrics."""

    def __init__(self, args: EngineArgs, log):
        self.args, self.log = args, log
        self.healthy = False
        self.created = int(time.time())
        self.metrics = Metrics(args.served_model_names[0])
        # The scheduler's bound: at most max_num_seqs requests run at once, the rest wait (num_requests_waiting).
        self.batch = threading.BoundedSemaphore(args.max_num_seqs)


def compact(obj) -> str:
    """JSON as vLLM's responses have it (starlette / pydantic: no spaces)."""
    return json.dumps(obj, separators=(",", ":"))


def reply_text(messages: list[dict], max_tokens: int | None) -> tuple[list[str], str]:
    """A deterministic answer as word tokens, and the finish reason."""
    last = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), "") or ""
    if isinstance(last, list):  # content parts
        last = " ".join(p.get("text", "") for p in last if isinstance(p, dict))
    words = f"stand-in reply to: {last}".split()
    if max_tokens is not None and len(words) > max_tokens:
        return words[:max_tokens], "length"
    return words, "stop"


def count_tokens(messages: list[dict]) -> int:
    """Prompt tokens: whitespace words of every message, plus 3 per message (chat template overhead)."""
    return sum(len(str(m.get("content", "")).split()) + 3 for m in messages)


# SGLang's names for the series the stand-in keeps (sglang/srt/observability/metrics_collector.py).
SGLANG_NAMES = {"vllm:num_requests_waiting": "sglang:num_queue_reqs", "vllm:num_requests_running":
                "sglang:num_running_reqs", "vllm:kv_cache_usage_perc": "sglang:token_usage",
                "vllm:prompt_tokens_total": "sglang:prompt_tokens_total",
                "vllm:generation_tokens_total": "sglang:generation_tokens_total",
                "vllm:time_to_first_token_seconds": "sglang:time_to_first_token_seconds",
                "vllm:e2e_request_latency_seconds": "sglang:e2e_request_latency_seconds"}


def sglang_metrics(text: str) -> str:
    """The vLLM-named exposition under SGLang's names; series SGLang has no name for are left out."""
    out = []
    for line in text.splitlines():
        found = re.search(r"vllm:[a-z_]+", line)
        base = next((k for k in SGLANG_NAMES if found and found.group().startswith(k)), None)
        if base is not None:
            out.append(line.replace(base, SGLANG_NAMES[base], 1))
    return "\n".join(out) + "\n"


class Handler(BaseHTTPRequestHandler):
    """One request against the stand-in."""

    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    state: State  # set on the subclass by make_server

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, fmt, *args):  # uvicorn-style access log on stdout
        self.state.log(f'{self.client_address[0]}:{self.client_address[1]} - "{self.requestline}" '
                       f"{args[1] if len(args) > 1 else ''}", prefix="INFO:     ")

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.send_header("x-request-id", uuid.uuid4().hex)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, obj) -> None:
        self._send(status, compact(obj).encode())

    def _error(self, status: int, message: str, kind: str, param: str | None = None) -> None:
        self._json(status, {"error": {"message": message, "type": kind, "param": param, "code": status}})

    def _authorised(self) -> bool:
        keys = self.state.args.api_keys
        if not keys or not self.path.startswith("/v1") and self.state.args.engine != "sglang":
            return True
        # SGLang's middleware (sglang/srt/utils/auth.py decide_request_auth) guards every path but these.
        if self.path.startswith(("/health", "/ready", "/metrics")):
            return True
        scheme, _, token = self.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and token in keys

    def do_OPTIONS(self):
        self._send(200, b"")

    def do_GET(self):
        if not self._authorised():
            return self._json(401, {"error": "Unauthorized"})
        path = self.path.split("?")[0]
        if path == "/health":
            return self._send(200 if self.state.healthy else 503, b"")
        if path == "/metrics" and self.state.args.metrics:
            text = self.state.metrics.render()
            text = sglang_metrics(text) if self.state.args.engine == "sglang" else text
            return self._send(200, text.encode(), "text/plain; version=0.0.4; charset=utf-8")
        if path == "/version":
            return self._json(200, {"version": self.state.args.version})
        if path == "/v1/models":
            a = self.state.args
            models = [self._model(n) for n in a.served_model_names]
            models += lora.cards(a.engine, a.adapters, a.served_model_names[0], self.state.created,
                                 models[0].get("permission", []))
            return self._json(200, {"object": "list", "data": models})
        self._json(404, {"detail": "Not Found"})

    def _model(self, name: str) -> dict:
        a = self.state.args
        if a.engine == "tensorrt-llm":  # tensorrt_llm/serve/openai_protocol.py ModelCard: four fields
            return {"id": name, "object": "model", "created": self.state.created, "owned_by": "tensorrt_llm"}
        if a.engine == "sglang":  # http_server.py available_models: root the served name (not the model path)
            return {"id": name, "object": "model", "created": self.state.created, "owned_by": "sglang",
                    "root": name, "parent": None, "max_model_len": a.max_model_len}
        return {"id": name, "object": "model", "created": self.state.created, "owned_by": "vllm", "root": a.model,
                "parent": None, "max_model_len": a.max_model_len,
                "permission": [{"id": f"modelperm-{uuid.uuid4().hex}", "object": "model_permission",
                                "created": self.state.created, "allow_create_engine": False,
                                "allow_sampling": True, "allow_logprobs": True, "allow_search_indices": False,
                                "allow_view": True, "allow_fine_tuning": False, "organization": "*",
                                "group": None, "is_blocking": False}]}

    def do_POST(self):
        if not self._authorised():
            return self._json(401, {"error": "Unauthorized"})
        length = int(self.headers.get("content-length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError as e:
            return self._error(400, f"invalid JSON: {e}", "BadRequestError")
        if self.path.split("?")[0] != "/v1/chat/completions":
            return self._json(404, {"detail": "Not Found"})
        if not self.state.healthy:
            return self._error(503, "The engine is not ready", "ServiceUnavailableError")
        # vLLM refuses a model it does not serve; trtllm-serve's openai_chat never looks at the requested
        # model (it echoes it back), so clients may ask for any name there.
        # vLLM's _check_model: a base model's name or a LoRA adapter's (SGLang picks an adapter by
        # "served:adapter" and serves the base model for any other name: serving_base.py _parse_model_parameter).
        known = self.state.args.served_model_names + tuple(n for n, _, _ in self.state.args.adapters)
        if self.state.args.engine == "vllm" and body.get("model") not in known:
            return self._error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError", "model")
        self._chat(body)

    def _chat(self, body: dict) -> None:
        start = time.monotonic()
        messages = body.get("messages") or []
        words, reason = reply_text(messages, body.get("max_completion_tokens") or body.get("max_tokens"))
        prompt = count_tokens(messages)
        usage = {"prompt_tokens": prompt, "completion_tokens": len(words), "total_tokens": prompt + len(words)}
        rid, model = f"chatcmpl-{uuid.uuid4().hex}", body.get("model")
        self.state.metrics.queued()
        self.state.batch.acquire()
        self.state.metrics.started(time.monotonic() - start)
        ttft = 0.0
        try:
            if body.get("stream"):
                ttft = self._stream(rid, model, words, reason, usage, body.get("stream_options") or {})
            else:
                time.sleep(token_seconds() * len(words))
                message = {"role": "assistant", "content": " ".join(words), "tool_calls": []}
                self._json(200, {"id": rid, "object": "chat.completion", "created": int(time.time()),
                                 "model": model, "usage": usage,
                                 "choices": [{"index": 0, "message": message, "finish_reason": reason,
                                              "logprobs": None}]})
                ttft = time.monotonic() - start
        finally:
            self.state.batch.release()
            self.state.metrics.finished(prompt, len(words), ttft, time.monotonic() - start, reason)

    def _stream(self, rid: str, model: str, words: list[str], reason: str, usage: dict, opts: dict) -> float:
        """Server-sent events as vLLM sends them: role chunk, one chunk per token, finish, usage, [DONE]."""
        start = time.monotonic()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        created = int(time.time())

        def event(delta: dict, finish: str | None = None, use: dict | None = None, choices: bool = True):
            chunk = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                     "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
                     if choices else []}
            if use is not None:
                chunk["usage"] = use
            self._chunk(f"data: {compact(chunk)}\n\n")

        event({"role": "assistant", "content": ""})
        ttft = time.monotonic() - start
        for i, word in enumerate(words):
            time.sleep(token_seconds())
            event({"content": word if i == 0 else f" {word}"})
        event({}, finish=reason)
        if opts.get("include_usage"):
            event({}, use=usage, choices=False)
        self._chunk("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        return ttft

    def _chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def token_seconds() -> float:
    """The decode time of one output token (knob INFERRY_STANDIN_TOKEN_S; default: none)."""
    return float(os.environ.get("INFERRY_STANDIN_TOKEN_S") or 0)


def make_server(state: State) -> ThreadingHTTPServer:
    """Bind --host/--port (like vLLM, before the model is loaded; requests wait until serving starts)."""
    handler = type("BoundHandler", (Handler,), {"state": state})
    server = ThreadingHTTPServer((state.args.host, state.args.port), handler)
    server.daemon_threads = True
    return server
