"""Kubernetes names, labels and quantities derived from a deployment (pure, deterministic)."""
from __future__ import annotations

import hashlib
import re

from infra.stack.config import Deployment

PART_OF = "inferry"
# Label-key prefix for inferry's own labels (kubernetes.io recommended labels for the rest).
INSTANCE = "app.kubernetes.io/instance"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"  # a node's GPU model, set by NVIDIA GPU feature discovery
DNS1035_MAX = 63


def dns_label(text: str, max_len: int = DNS1035_MAX) -> str:
    """A DNS-1035 label (Service names): lowercase, digits, '-', starts with a letter; hashed when cut."""
    slug = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    slug = re.sub(r"-{2,}", "-", slug)
    if not slug or not slug[0].isalpha():
        slug = "m-" + slug
    if len(slug) <= max_len:
        return slug.rstrip("-")
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{slug[:max_len - 9].rstrip('-')}-{digest}"


def label_value(text: str) -> str:
    """A valid label value (63 chars, alphanumeric at both ends, '-_.' inside)."""
    value = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:63]
    return value.strip("-_.")


def app_name(d: Deployment) -> str:
    """The name of the Deployment, Service and every object of this model."""
    # 52 leaves room for suffixes such as '-weights' and '-build-<hash>' within 63.
    return dns_label(f"{PART_OF}-{d.model.name}", 52)


def selector_labels(d: Deployment) -> dict[str, str]:
    """Labels that select this model's pods (stable across updates)."""
    return {"app.kubernetes.io/name": PART_OF, INSTANCE: app_name(d)}


def common_labels(d: Deployment, engine: str, component: str) -> dict[str, str]:
    """Every label an object carries: the user's, then inferry's (which win)."""
    labels = dict(d.target.labels)
    labels.update(selector_labels(d))
    labels.update({
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": "pulumi",
        "inferry.dev/model": label_value(d.model.name),
        "inferry.dev/engine": label_value(engine),
    })
    return labels


def memory_quantity(size: str) -> str:
    """A Docker-style size ('16g', '512m') or a Kubernetes quantity, as a Kubernetes quantity."""
    m = re.fullmatch(r"(\d+)([kmgt])b?", size.strip().lower())
    if m:
        return f"{m.group(1)}{m.group(2).upper() if m.group(2) != 'k' else 'K'}i"
    return size


_UNITS = {"": 1, "m": 0.001, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
          "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60}


def quantity_bytes(q: str) -> int:
    """A Kubernetes quantity (config.QUANTITY: no exponents) in whole units, e.g. '200Gi' -> 214748364800."""
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([A-Za-z]*)", q)
    if not m or m.group(2) not in _UNITS:
        raise ValueError(f"not a Kubernetes quantity: {q!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def short_hash(*parts: str) -> str:
    """Eight hex digits over parts: names that change when their content does."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:8]
