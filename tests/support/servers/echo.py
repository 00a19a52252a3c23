"""A hostile S3 endpoint for tests: answers every request 403 with the request's own headers in the error text.

Some servers and proxies echo the request in their errors; whatever inferry prints of an error
must then still hold no key material. The Authorization headers received are kept for the test.
"""
from __future__ import annotations

import threading
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class EchoServer:
    """403 for everything; the body is an S3 error (code `code`) whose message is the request line and headers."""

    def __init__(self, code: str = "AccessDenied", xml: bool = True):
        self.code, self.xml = code, xml
        self.authorizations: list[str] = []
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._http.daemon_threads = True

    @property
    def endpoint(self) -> str:
        """The server's URL."""
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        echo = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                echo.authorizations.append(self.headers.get("Authorization", ""))
                seen = f"{self.requestline} {' '.join(f'{k}: {v}' for k, v in self.headers.items())}"
                body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{echo.code}</Code>'
                        f"<Message>{escape(seen)}</Message></Error>" if echo.xml else seen).encode()
                self.send_response(403)
                self.send_header("Content-Type", "application/xml" if echo.xml else "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _answer

            def log_message(self, *_: object) -> None:
                pass

        return Handler

    def __enter__(self) -> EchoServer:
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()
