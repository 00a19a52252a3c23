"""What every engine shares: where weights appear, how values become flag text, common env vars."""
from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any, Callable

from infra.stack.config import Deployment
from infra.engines.spec import MODELS_DIR, EnvVar


@dataclass(frozen=True)
class Flag:
    """One config value -> one command-line flag. `get` returns None to leave the flag out."""

    flag: str
    get: Callable[[Deployment], Any]
    style: str = "value"  # "value": --flag V; "switch": --enable-x / --disable-x (else --no-x); "on": --flag if True


def weights_dir(weights: str, models_dir: str = MODELS_DIR) -> str:
    """Where the target makes weights visible: MODELS_DIR/<s3 prefix> or MODELS_DIR/<basename of a path>."""
    if weights.startswith("s3://"):
        name = weights[5:].split("/", 1)[1]
    else:
        name = posixpath.basename(weights.rstrip("/"))
    return posixpath.join(models_dir, name.strip("/"))


def flag_text(value: Any) -> str:
    """A config value as flag text: ints plain, floats shortest round-trip, bools lower-case."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _negate(flag: str) -> str:
    # vLLM's EnableDisableAction pairs --enable-x with --disable-x (--no-enable-x is a hidden alias).
    return "--disable-" + flag[9:] if flag.startswith("--enable-") else "--no-" + flag[2:]


def render_flags(table: tuple[Flag, ...], d: Deployment) -> list[str]:
    """Every flag of a table that has a value, in table order."""
    args: list[str] = []
    for f in table:
        value = f.get(d)
        if value is None:
            continue
        if f.style == "switch":
            args.append(f.flag if value else _negate(f.flag))
        elif f.style == "on":
            if value:
                args.append(f.flag)
        else:
            args += [f.flag, flag_text(value)]
    return args


def s3_env(d: Deployment) -> list[EnvVar]:
    """What an S3 client inside the engine needs for an S3-compatible store (keys by reference)."""
    # Run:ai Model Streamer docs (env vars for S3-compatible storage): endpoint, path-style addressing,
    # no EC2 metadata lookups; credentials from the standard AWS variables.
    s = d.storage
    return [
        EnvVar("AWS_ENDPOINT_URL", s.endpoint),
        EnvVar("AWS_DEFAULT_REGION", s.region),
        EnvVar("AWS_EC2_METADATA_DISABLED", "true"),
        EnvVar("RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING", "1" if s.addressing_style == "virtual" else "0"),
        # The engine only reads: the read-only pair when the stack names one (storage.read_access_key_id).
        *(EnvVar(name, secret=ref, secret_field=field)
          for name, (field, ref) in zip(("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"), s.serving_keys)),
    ]


def uses_hub(d: Deployment) -> bool:
    """Whether the engine may download from the Hugging Face hub at run time: a token, or a draft by HF id."""
    spec = getattr(d.engine, "speculative", None)
    draft = getattr(spec, "model", None) or ""
    return d.model.hf_token is not None or bool(draft and not draft.startswith(("s3://", "/")))


def telemetry_switches(d: Deployment, *usage_off: str) -> dict[str, str]:
    """The environment that keeps the engine from reporting out: its own switches (usage_off), DO_NOT_TRACK and
    the hub's telemetry off for every engine, and the hub offline unless the engine downloads from it."""
    env = dict.fromkeys((*usage_off, "DO_NOT_TRACK", "HF_HUB_DISABLE_TELEMETRY"), "1")
    if not uses_hub(d):
        env["HF_HUB_OFFLINE"] = "1"
    return env


def hf_env(d: Deployment, *usage_off: str) -> list[EnvVar]:
    """Nothing sent out, then the Hugging Face token when the stack has one (gated tokenizers, HF-id drafts).

    usage_off: the engine's own usage-statistics switches, each set to 1. DO_NOT_TRACK and the hub's telemetry
    switch are set for every engine; the hub is offline unless the engine downloads from it (uses_hub).
    """
    env = [EnvVar(name, value) for name, value in telemetry_switches(d, *usage_off).items()]
    if d.model.hf_token is not None:
        env.append(EnvVar("HF_TOKEN", secret=d.model.hf_token, secret_field="model.hf_token"))
    return env
