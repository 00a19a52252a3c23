"""A hostile S3 store for tests: it lists and serves whatever keys it is given, '..' in them included.

Real S3 keeps such keys (a key is any string); the suite's real server, rclone on a folder, cannot hold them. So
the clients' handling of a key that would land outside their destination is tried against this one. It answers
the calls an S3 client makes to download a prefix (ListObjectsV2, GetObject with or without a Range, HeadObject)
and records every key asked for, so a test can show what a client fetched from the server's side.
"""
from __future__ import annotations

import threading
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlparse
from xml.sax.saxutils import escape

MODIFIED = "2026-01-01T00:00:00.000Z"


class HostileStore:
    """Serves objects {key: body} of one bucket at `endpoint`; `asked` lists the keys whose bodies were asked."""

    def __init__(self, bucket: str, objects: dict[str, bytes]):
        self.bucket, self.objects, self.asked = bucket, objects, []
        store = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                store._answer(self, body=True)

            def do_HEAD(self) -> None:
                store._answer(self, body=False)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)

    @property
    def endpoint(self) -> str:
        """The URL clients are given as the store's endpoint."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> HostileStore:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, h: BaseHTTPRequestHandler, body: bool) -> None:
        url = urlparse(h.path)
        bucket, _, key = unquote(url.path).lstrip("/").partition("/")
        if bucket != self.bucket:
            return self._send(h, 404, b"<Error><Code>NoSuchBucket</Code></Error>", body)
        if not key:
            return self._send(h, 200, self._listing(parse_qs(url.query)), body)
        if key not in self.objects:
            return self._send(h, 404, b"<Error><Code>NoSuchKey</Code></Error>", body)
        if body:
            self.asked.append(key)
        data, status, extra = self.objects[key], 200, {}
        ranged = h.headers.get("Range", "")
        if ranged.startswith("bytes=") and data:
            first, _, last = ranged[6:].partition("-")
            start, end = int(first), min(int(last or len(data) - 1), len(data) - 1)
            extra = {"Content-Range": f"bytes {start}-{end}/{len(data)}"}
            data, status = data[start:end + 1], 206
        self._send(h, status, data, body, {"ETag": '"0"', "Last-Modified": formatdate(usegmt=True), **extra})

    def _listing(self, query: dict[str, list[str]]) -> bytes:
        prefix = query.get("prefix", [""])[0]
        encode = query.get("encoding-type", [""])[0] == "url"  # the aws CLI asks for keys URL-encoded
        rows = "".join(
            f"<Contents><Key>{escape(quote(k, safe='/') if encode else k)}</Key><LastModified>{MODIFIED}"
            f"</LastModified><ETag>\"0\"</ETag><Size>{len(v)}</Size><StorageClass>STANDARD</StorageClass></Contents>"
            for k, v in sorted(self.objects.items()) if k.startswith(prefix))
        kind = "<EncodingType>url</EncodingType>" if encode else ""
        return (f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>{self.bucket}</Name>'
                f"<Prefix>{escape(prefix)}</Prefix>{kind}<KeyCount>{rows.count('<Contents>')}</KeyCount>"
                f"<MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>{rows}</ListBucketResult>").encode()

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, data: bytes, body: bool, headers: dict | None = None) -> None:
        h.send_response(status)
        for name, value in {"Content-Length": str(len(data)), **(headers or {})}.items():
            h.send_header(name, value)
        h.end_headers()
        if body:
            h.wfile.write(data)
