"""The keys of a stack file around the deployment: top-level keys, config keys, and what each is for."""
from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from infra.errors import Problem
from infra.stack.problems import closest, did_you_mean, key_text
from infra.stack.secrets import is_secure

NAMESPACE = "inferry"
DEPLOYMENT_KEY = f"{NAMESPACE}:deployment"
TOP_LEVEL = {"config", "encryptionsalt", "secretsprovider", "encryptedkey", "environment"}
MISSING = object()  # no inferry:deployment key at all (a null one is a value, and a problem of its own)


def misspelt_deployment(keys: Iterable[Any]) -> str | None:
    """The config key most likely meant as inferry:deployment (inferry:deploymnet, infery:deployment,
    deployment), if any. Another namespace (aws:region, kubernetes:...) is never one: its namespace must be
    close to inferry's."""
    best, best_score = None, 0.0
    for key in keys:
        if not isinstance(key, str) or key == DEPLOYMENT_KEY:
            continue
        ns, _, name = key.rpartition(":")
        if ns and not closest(ns, {NAMESPACE}):
            continue
        if closest(name, {"deployment"}):
            score = difflib.SequenceMatcher(None, key, DEPLOYMENT_KEY).ratio()
            best, best_score = (key, score) if score > best_score else (best, best_score)
    return best


def misspelt_deployment_problem(key: str) -> Problem:
    """The bullet for a deployment written under a misspelt key."""
    return Problem(key_text(key), "unknown config key", hint=f"did you mean '{DEPLOYMENT_KEY}'?")


def missing_deployment_problem() -> Problem:
    """The bullet for a stack with no deployment at all."""
    return Problem(DEPLOYMENT_KEY, "required config key is missing",
                   hint="add it: model, engine, target, storage, provider and serving (see `inferry init NAME`)")


def _config_section(doc: dict) -> tuple[Any, list[Problem]]:
    """(the config mapping, problems with the top-level keys); a misspelt `config:` key (confg:) is named and
    read as config, so the problems under it are found too."""
    problems, config = [], doc.get("config")
    for k in doc:
        if k in TOP_LEVEL:
            continue
        guess = closest(k, TOP_LEVEL)
        problems.append(Problem(key_text(k), "unknown top-level key", hint=did_you_mean(k, TOP_LEVEL)))
        if guess == "config" and config is None and isinstance(doc[k], dict):
            config = doc[k]
    return config, problems


def split_config(doc: Any) -> tuple[Any, dict[str, Any], list[Problem]]:
    """(deployment object or MISSING, the other inferry config values by name, problems) from a stack document."""
    if not isinstance(doc, dict):
        found = "an empty file" if doc is None else type(doc).__name__
        return MISSING, {}, [Problem("", "expected a mapping with a 'config' key", found,
                                     hint="start from `inferry init NAME` or stacks/Pulumi.eu-ssh.yaml")]
    config, problems = _config_section(doc)
    if not isinstance(config, dict):
        return MISSING, {}, problems + [Problem("config", "expected a mapping of config keys",
                                                type(config).__name__ if config is not None else "nothing")]
    prefix = NAMESPACE + ":"
    ours = {k[len(prefix):]: v for k, v in config.items() if isinstance(k, str) and k.startswith(prefix)}
    if "deployment" in ours:
        return ours.pop("deployment"), ours, problems
    typo = misspelt_deployment(config)
    if typo is None:
        return MISSING, ours, problems + [missing_deployment_problem()]
    # Read as the deployment, so what is wrong inside it is found in the same run.
    ours.pop(typo.removeprefix(prefix), None)
    return config[typo], ours, problems + [misspelt_deployment_problem(typo)]


def unused_secret_problems(values: dict[str, Any], referenced: set[str], stack: str) -> list[Problem]:
    """Warnings for inferry secrets no {config: KEY} reads: a stale secret, or a reference with a typo
    (reference_problems names that one). A warning: `pulumi config set --secret` before the reference is
    written is the documented order, and an unused secret serves nothing wrong."""
    return [Problem(f"{NAMESPACE}:{key_text(k)}", "secret is set but no {config: " + key_text(k) + "} reference "
                    "in inferry:deployment reads it", hint=f"reference it, or remove it with `pulumi config rm "
                    f"--stack {stack} {NAMESPACE}:{key_text(k)}`", severity="warning")
            for k, v in values.items() if is_secure(v) and k not in referenced]
