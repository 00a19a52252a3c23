"""What every target section of the stack file shares: strictness, the secret reference, TargetBase.

Each target's own section lives in its folder (infra/targets/<kind>/config.py) and is registered with the schema
through infra/stack/kinds.py, as the engines' sections are."""
from __future__ import annotations

import re
from abc import abstractmethod

from pydantic import BaseModel, ConfigDict, Field, model_validator

# Kubernetes naming (DNS-1123 label) and label-value rules.
DNS1123 = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"
QUANTITY = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$"  # resource.Quantity, without exponents
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
CONFIG_KEY = r"^[A-Za-z][A-Za-z0-9_.\-]*$"
# Counts and sizes past a C int are typos, and engines parse them as C ints (or overflow turning them to float).
INT32_MAX = 2**31 - 1
SHARE = re.compile(r"([1-9][0-9]?|100)%")
# Every section: unknown keys are errors and values are never converted (strict): "8000" is not a port,
# 1 and "off" are not booleans, 2.0 is not a count. NaN and infinities are refused. A stack file read by
# Pulumi (JSON from pulumi.Config) and by the CLI (YAML 1.2) reaches these models with the same types.
STRICT = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class StrictSection(BaseModel):
    """Base for target sections: unknown keys are errors, values are not coerced (see STRICT)."""

    model_config = STRICT


class SecretRef(StrictSection):
    """Where a secret comes from: a Pulumi secret config key, or an environment variable."""

    config: str | None = Field(default=None, pattern=CONFIG_KEY, description="key of a `secure:` value, e.g. s3SecretKey")
    env: str | None = Field(default=None, pattern=ENV_NAME, description="environment variable name")

    @model_validator(mode="after")
    def _exactly_one(self) -> "SecretRef":
        if (self.config is None) == (self.env is None):
            raise ValueError("give exactly one of 'config' (a Pulumi secret key) or 'env' (a variable name)")
        return self

    def describe(self) -> str:
        """Where the secret is read from, never its value."""
        return f"secret config inferry:{self.config}" if self.config else f"environment variable {self.env}"


class TargetBase(StrictSection):
    """What inferry reads from any target section: its kind, instances, weight streaming and own secrets."""

    kind: str

    @property
    @abstractmethod
    def instances(self) -> int:
        """Engine instances the stack runs (every section says; pydantic's model class is an ABC)."""

    @property
    def streams_weights(self) -> bool | None:
        """Whether the target asks the engine to stream weights from the store (None: it has no say)."""
        return None

    def secret_refs(self) -> dict[str, SecretRef]:
        """The target's own secrets, by field path."""
        return {}
