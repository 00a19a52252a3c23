"""What an S3 bucket name and a store endpoint must look like (no imports: the stack schema uses them too)."""
from __future__ import annotations

# S3 bucket naming rules (AWS): 3-63 chars, lowercase letters, digits, dots, hyphens.
BUCKET_NAME = r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$"


def endpoint_problem(url: str) -> str | None:
    """Why url is not a usable http(s) endpoint, or None (urlsplit/port raise on what boto3 cannot use)."""
    from urllib.parse import urlsplit

    expected = "expected http(s)://HOST[:PORT], e.g. https://s3.eu-central-1.example.com"
    try:
        parts = urlsplit(url)
        port_ok = parts.port is None or parts.port > 0
    except ValueError as e:
        return f"{expected} ({e})"
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok or any(c.isspace() for c in url):
        return expected
    return None
