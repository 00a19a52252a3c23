"""DeploymentArgs -> a checked deployment, its secrets and its late values, before anything is created."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from infra.component.args import DeploymentArgs
from infra.component.prepared import Prepared
from infra.errors import ConfigError, Problem
from infra.stack.config import Deployment
from infra.stack.late import Late, is_output, replaced
from infra.stack.secretfix import KEY_STAND_IN, SecretField
from infra.stack.validate import checked, require_valid

# Where each secret sits in the sections; the checked deployment holds the stack file's reference form there.
SECRET_AT = {SecretField.PRIVATE_KEY: ("target", "private_key"), SecretField.API_KEY: ("serving", "api_key"),
             SecretField.S3_ACCESS: ("storage", "access_key_id"),
             SecretField.S3_SECRET: ("storage", "secret_access_key"), SecretField.HF_TOKEN: ("model", "hf_token"),
             SecretField.S3_READ_ACCESS: ("storage", "read_access_key_id"),
             SecretField.S3_READ_SECRET: ("storage", "read_secret_access_key")}
# The variables those references name: `pulumi refresh` of SSH hosts reads the private key from its own
# (a refresh gets no secret inputs; the stack-file program's reference is a config key instead).
STAND_IN = {SecretField.PRIVATE_KEY: KEY_STAND_IN, SecretField.API_KEY: "INFERRY_API_KEY",
            SecretField.S3_ACCESS: "INFERRY_S3_ACCESS_KEY", SecretField.S3_SECRET: "INFERRY_S3_SECRET_KEY",
            SecretField.HF_TOKEN: "INFERRY_HF_TOKEN", SecretField.S3_READ_ACCESS: "INFERRY_S3_READ_ACCESS_KEY",
            SecretField.S3_READ_SECRET: "INFERRY_S3_READ_SECRET_KEY"}
SECTIONS = ("model", "engine", "target", "storage", "provider", "serving", "policy")


def plain(value: Any) -> Any:
    """Sections as the stack file holds them: models dumped, mappings and sequences copied; leaves kept."""
    if isinstance(value, BaseModel):
        return plain(value.model_dump(exclude_unset=True))
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def take_secrets(raw: dict[str, Any]) -> dict[str, Any]:
    """Pop each secret value given in raw (made a secret Output), leaving its stand-in reference there."""
    import pulumi

    found = {}
    for path, (section, key) in SECRET_AT.items():
        holder = raw.get(section)
        if isinstance(holder, dict) and holder.get(key) is not None:
            found[path] = pulumi.Output.secret(holder[key])
            holder[key] = {"env": STAND_IN[path]}
    return found


def named_hosts(raw: dict[str, Any]) -> list[Problem]:
    """A host whose address is an Output needs a name: it names the host's resources, known before it."""
    hosts = raw.get("target", {}).get("hosts") if isinstance(raw.get("target"), dict) else None
    return [Problem(f"target.hosts[{i}].name", "required when the address is an Output",
                    hint="name the host, e.g. gpu-1: its resources are named after it before the address is known")
            for i, h in enumerate(hosts or []) if isinstance(h, dict) and is_output(h.get("address")) and not h.get("name")]


def prepare(args: DeploymentArgs, source: str) -> Prepared:
    """Check args as `inferry validate` checks a stack (ConfigError: every bullet at once); the late values are
    checked again, with the rest, when they resolve."""
    raw = {s: plain(getattr(args, s)) for s in SECTIONS if getattr(args, s) is not None}
    secrets = take_secrets(raw)
    late = Late()
    held = late.split(raw)
    d = _valid(held, source, named_hosts(raw))
    prepared = Prepared(d, secrets, source, late, require_valid(d, source))
    late.check_when_known(lambda values: _valid_when_known(held, values, source))
    return prepared


def _valid(raw: Any, source: str, problems: list[Problem]) -> Deployment:
    d, found = checked(raw)
    if d is None or problems:
        raise ConfigError(source, problems + found)
    return d


def _valid_when_known(held: Any, values: dict[str, str], source: str) -> None:
    """The same checks with the late values in (a host's address as its VM resource gave it)."""
    where = f"{source} (with the values of its Outputs)"
    require_valid(_valid(replaced(held, values), where, []), where)
