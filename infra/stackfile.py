"""The one loader: a stack file (CLI) or pulumi.Config (program) -> a validated Stack."""
from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from infra.checks import cross_checks
from infra.config import Deployment
from infra.errors import ConfigError, InferryError, Problem
from infra.problems import problems_from_validation

NAMESPACE = "inferry"
DEPLOYMENT_KEY = f"{NAMESPACE}:deployment"
TOP_LEVEL = {"config", "encryptionsalt", "secretsprovider", "encryptedkey", "environment"}
SECRETISH = ("key", "secret", "token", "password", "passphrase")
# Pulumi's own rule (sdk/go/common/workspace/project.go, validateStackName): 1-100 of these characters.
STACK_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


def project_root(start: Path | None = None) -> Path:
    """The project folder, found as Pulumi finds it: the nearest Pulumi.yaml from the current folder up.

    Outside any project, the folder inferry was installed from (a checkout) if it has one, else the current
    folder: stacks are then named by path.
    """
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "Pulumi.yaml").is_file():
            return folder
    checkout = Path(__file__).resolve().parent.parent
    return checkout if (checkout / "Pulumi.yaml").is_file() else here


@dataclass(frozen=True)
class Stack:
    """A validated stack: its name, where it came from and its deployment."""

    name: str
    source: str
    deployment: Deployment
    path: Path | None = None


def stack_path(stack: str, root: Path | None = None) -> tuple[str, Path]:
    """(stack name, file) for a stack name under stacks/ or a path to a stack file."""
    p = Path(stack)
    if stack and (p.suffix in (".yaml", ".yml") or p.exists() or os.sep in stack):
        name = p.name.removeprefix("Pulumi.").rsplit(".", 1)[0]
        return _check_name(name, stack), p
    return _check_name(stack, stack), (root or project_root()) / "stacks" / f"Pulumi.{stack}.yaml"


def _check_name(name: str, given: str) -> str:
    """The stack name, or an InferryError: Pulumi refuses other names later, after work was done."""
    if not STACK_NAME.match(name):
        raise InferryError(f"invalid stack name {name!r}: Pulumi stack names are 1-100 letters, digits, "
                           "'-', '_' or '.'", "choose a name such as eu-ssh (for a path: Pulumi.eu-ssh.yaml)",
                           where=given or "STACK")
    return name


def read_yaml(path: Path) -> Any:
    """Parse a YAML file; errors carry line and column."""
    if path.is_dir():
        raise ConfigError(str(path), [Problem("", "is a folder, not a stack file",
                                              hint="pass a stack name or a file such as stacks/Pulumi.eu-ssh.yaml")])
    if not path.is_file():
        hint = f"create it with `inferry init {path.name.removeprefix('Pulumi.').removesuffix('.yaml')}`"
        raise ConfigError(str(path), [Problem("", "stack file not found", hint=hint)])
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        raise ConfigError(str(path), [Problem("", f"YAML syntax error at {where}: {e.problem or e}")]) from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ConfigError(str(path), [Problem("", f"not readable as YAML: {e}")]) from None
    except OSError as e:
        raise ConfigError(str(path), [Problem("", f"cannot read the stack file: {e.strerror}",
                                              hint="check the file's permissions")]) from None


def _is_secure(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"secure"} and isinstance(value["secure"], str)


def _split_config(doc: Any) -> tuple[Any, dict[str, Any], list[Problem]]:
    """(deployment object, other inferry keys, problems) from a stack document."""
    if not isinstance(doc, dict):
        found = "an empty file" if doc is None else type(doc).__name__
        return None, {}, [Problem("", "expected a mapping with a 'config' key", found,
                                  hint="start from `inferry init NAME` or stacks/Pulumi.eu-ssh.yaml")]
    problems = [Problem(str(k), "unknown top-level key", hint=_guess(str(k), TOP_LEVEL))
                for k in doc if str(k) not in TOP_LEVEL]
    config = doc.get("config")
    if not isinstance(config, dict):
        return None, {}, problems + [Problem("config", "expected a mapping of config keys",
                                             type(config).__name__ if config is not None else "nothing")]
    ours = {str(k)[len(NAMESPACE) + 1:]: v for k, v in config.items() if str(k).startswith(NAMESPACE + ":")}
    if "deployment" not in ours:
        guess = _guess(next(iter(ours), ""), {"deployment"})
        problems.append(Problem(DEPLOYMENT_KEY, "required config key is missing", hint=guess or "add it"))
    return ours.pop("deployment", None), ours, problems


def _guess(word: str, options: set[str]) -> str | None:
    match = difflib.get_close_matches(word, sorted(options), n=1, cutoff=0.6)
    return f"did you mean '{match[0]}'?" if match else None


def _secret_problems(d: Deployment, stack: str, is_secure, exists) -> list[Problem]:
    """Every {config: KEY} reference must name a `secure:` value of this stack."""
    problems = []
    for path, ref in d.secret_refs().items():
        if ref.config is None:
            continue
        fix = f"run `pulumi config set --secret --stack {stack} {NAMESPACE}:{ref.config} VALUE`"
        if not exists(ref.config):
            problems.append(Problem(path, f"secret {NAMESPACE}:{ref.config} is not set", hint=fix))
        elif not is_secure(ref.config):
            problems.append(Problem(f"{NAMESPACE}:{ref.config}", f"secret for {path} is written in plain text",
                                    hint=f"remove the plain value from the file and {fix}"))
    return problems


def _plain_secretish(others: dict[str, Any], referenced: set[str]) -> list[Problem]:
    """Plain values under secret-looking keys, and stray inferry keys."""
    problems = []
    for key, value in others.items():
        if _is_secure(value) or key in referenced:
            continue  # referenced keys are reported by _secret_problems
        if any(s in key.lower() for s in SECRETISH):
            problems.append(Problem(f"{NAMESPACE}:{key}", "looks like a secret but is written in plain text",
                                    hint=f"run `pulumi config set --secret {NAMESPACE}:{key} VALUE`"))
        elif key not in referenced:
            problems.append(Problem(f"{NAMESPACE}:{key}", "unknown config key", hint=_guess(key, {"deployment"})))
    return problems


def parse_deployment(raw: Any, source: str, prefix: str = DEPLOYMENT_KEY) -> Deployment:
    """Validate one deployment object; ConfigError lists every problem by field path."""
    if not isinstance(raw, dict):
        raise ConfigError(source, [Problem(prefix, "expected a mapping of sections",
                                           type(raw).__name__ if raw is not None else "nothing")])
    try:
        d = Deployment.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(source, problems_from_validation(Deployment, e)) from None
    problems = cross_checks(d)
    if problems:
        raise ConfigError(source, problems)
    return d


def load_stack(stack: str, root: Path | None = None) -> Stack:
    """Load and validate a stack file for the CLI (no Pulumi CLI needed)."""
    name, path = stack_path(stack, root)
    doc = read_yaml(path)
    raw, others, problems = _split_config(doc)
    d = None
    if raw is not None:
        try:
            d = parse_deployment(raw, str(path))
        except ConfigError as e:
            problems += e.problems
    if d is not None:
        referenced = {r.config for r in d.secret_refs().values() if r.config}
        problems += _secret_problems(d, name, lambda k: _is_secure(others.get(k)), lambda k: k in others)
        problems += _plain_secretish(others, referenced)
    if problems:
        raise ConfigError(str(path), problems)
    return Stack(name=name, source=str(path), deployment=d, path=path)


def load_from_pulumi() -> Stack:
    """Load and validate the running Pulumi program's config (pulumi.Config)."""
    import pulumi  # imported here: the CLI path must not need a Pulumi runtime

    cfg = pulumi.Config(NAMESPACE)
    source = f"stack {pulumi.get_stack()}"
    raw = cfg.get_object("deployment")
    if raw is None:
        raise ConfigError(source, [Problem(DEPLOYMENT_KEY, "required config key is missing", hint="add it")])
    d = parse_deployment(raw, source)
    full = lambda k: f"{NAMESPACE}:{k}"  # noqa: E731
    problems = _secret_problems(d, pulumi.get_stack(), lambda k: pulumi.runtime.is_config_secret(full(k)),
                                lambda k: cfg.get(k) is not None)
    if problems:
        raise ConfigError(source, problems)
    return Stack(name=pulumi.get_stack(), source=source, deployment=d)
