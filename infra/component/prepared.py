"""Prepared: a deployment checked on its plain values, with its secret Outputs and late values."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from infra.errors import Problem
from infra.stack.config import Deployment
from infra.stack.late import Late


@dataclass
class Prepared:
    """A deployment checked on its plain values: secret values by field path, and its late values."""

    deployment: Deployment
    secrets: dict[str, Any]  # field path -> secret Output
    source: str
    late: Late = field(default_factory=Late)
    warnings: list[Problem] = field(default_factory=list)
