"""`inferry validate` findings about the weight store."""
from __future__ import annotations

from urllib.parse import urlparse

from infra.stack.config import Deployment
from infra.errors import Problem

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


def storage_checks(d: Deployment) -> list[Problem]:
    """Warn when weights would travel unencrypted to a remote store."""
    url = urlparse(d.storage.endpoint)
    if url.scheme == "http" and (url.hostname or "") not in LOCAL_HOSTS:
        return [Problem("storage.endpoint", "plain http to a remote store: weights travel unencrypted",
                        d.storage.endpoint, hint="use https://", severity="warning")]
    return []
