"""Probe an OpenAI-compatible endpoint: health, metrics text, and one real chat completion."""
from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.request

from infra.errors import InferryError


def base_url(endpoint: str) -> str:
    """The server root of an endpoint URL (a trailing /v1 is the API prefix, not the server)."""
    url = endpoint.rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


def get(url: str, timeout: float = 3.0, api_key: str | None = None) -> tuple[int, str]:
    """(HTTP status, body) of a GET; status 0 when nothing answered."""
    try:
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, ""
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException):
        return 0, ""  # malformed URL, refused, reset, or cut off mid-answer (a server stopping): nothing answered


def healthy(endpoint: str, timeout: float = 3.0) -> bool:
    """Whether GET /health answers 200."""
    return get(base_url(endpoint) + "/health", timeout)[0] == 200


def wait_healthy(endpoint: str, timeout_s: float, interval_s: float = 0.5) -> None:
    """Wait until /health answers 200; InferryError after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        if healthy(endpoint):
            return
        if time.monotonic() >= deadline:
            raise InferryError(f"{endpoint}/health did not answer 200 within {timeout_s:.0f}s",
                               "check the engine's log on the host (journalctl -u inferry-engine, or docker logs)",
                               where=endpoint)
        time.sleep(interval_s)


def chat_check(endpoint: str, api_key: str, model: str, timeout_s: float = 60.0) -> str:
    """Send one real chat completion with the openai client; returns the reply text."""
    import openai

    client = openai.OpenAI(base_url=base_url(endpoint) + "/v1", api_key=api_key, max_retries=1, timeout=timeout_s)
    try:
        reply = client.chat.completions.create(
            model=model, max_tokens=16, temperature=0,
            messages=[{"role": "user", "content": "Reply with one word: ready?"}])
    except openai.AuthenticationError:
        raise InferryError(f"{endpoint} refused the API key (401)",
                           "serving.api_key of the stack must match the key the engine was started with",
                           where=endpoint) from None
    except openai.APIStatusError as e:
        raise InferryError(f"chat completion failed with HTTP {e.status_code}: {str(e.message)[:200]}",
                           f"check that the engine serves model {model!r}", where=endpoint) from None
    except openai.APIError as e:
        raise InferryError(f"chat completion failed: {type(e).__name__}: {str(e)[:200]}",
                           "check that the endpoint is reachable from here", where=endpoint) from None
    if not reply.choices or reply.choices[0].message.content is None:
        raise InferryError("chat completion returned no message", "check the engine's log", where=endpoint)
    return reply.choices[0].message.content
