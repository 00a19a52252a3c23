"""Endpoints named on the command line (`--endpoint URL`): no Pulumi outputs, the API key from the environment."""
from __future__ import annotations

import json
import os

from infra.stack.secretfix import SecretField
from infra.errors import InferryError
from infra.lifecycle import probe
from infra.stack.stackfile import Stack

KEY_ENV = "INFERRY_API_KEY"


def checked_urls(urls: list[str]) -> list[str]:
    """The --endpoint URLs, each an http(s) URL; InferryError naming the bad one."""
    from infra.stack.storenames import endpoint_problem

    for url in urls:
        problem = endpoint_problem(url)
        if problem:
            raise InferryError(f"{url!r} is not an endpoint URL: {problem}", "pass --endpoint http(s)://HOST[:PORT]",
                               where="--endpoint")
    return [u.rstrip("/") for u in urls]


def api_key(stack: Stack | None, env: str, required: bool) -> str | None:
    """The stack's serving.api_key, else the environment variable `env`; None when neither and not required."""
    from infra.lifecycle.secrets import resolve

    if stack is not None:
        try:
            return resolve(stack.deployment.serving.api_key, stack.name, SecretField.API_KEY, stack.path)
        except InferryError:
            if required:
                raise
            return None  # status reads /health without a key; /metrics may need it
    value = os.environ.get(env)
    if not value and required:
        raise InferryError(f"{env} is not set: the endpoint's API key is read from it",
                           f"export {env}=... (the key the engine serves with), or pass --api-key-env VAR "
                           "naming the variable that holds it", where="--api-key-env")
    return value or None


def served_model(url: str, key: str | None) -> str:
    """The model the endpoint serves: the first id GET /v1/models lists."""
    code, body = probe.get(probe.base_url(url) + "/v1/models", 10.0, key)
    try:
        if code == 200:
            return str(json.loads(body)["data"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError):
        pass
    raise InferryError(f"{url}/v1/models answered {code or 'nothing'} without a model list: cannot tell which "
                       "model it serves", "check the URL and the API key, or name a stack (STACK) to take the "
                       "model from it", where=url)
