"""The plain HTTP client against a real loopback server: every status is an answer, the method, headers and
body are sent as given, the body is capped, and no answer is an :class:`HttpFailure` (an ``OSError``)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from fptrack.core.plain_http import HttpFailure, http_request

Seen = list[tuple[str, str, dict[str, str], bytes]]


@contextmanager
def _server() -> Iterator[tuple[str, Seen]]:
    seen: Seen = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            seen.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            status = 404 if self.path.startswith("/missing") else 200
            payload = b"x" * 5000 if self.path == "/big" else b"echo:" + body
            self.send_response(status)
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("X-Seen", "yes")
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = _answer

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_statuses_are_answers_and_requests_are_sent_as_given() -> None:
    with _server() as (base, seen):
        reply = http_request(base + "/missing?q=1")
        assert (reply.status, reply.headers["x-seen"]) == (404, "yes")
        posted = http_request(
            base + "/tsa", method="POST", body=b"query", headers={"Content-Type": "application/x-test"}
        )
        assert (posted.status, posted.body) == (200, b"echo:query")
        assert http_request(base + "/big", max_bytes=100).body == b"x" * 100
    assert [(method, path) for method, path, _, _ in seen] == [
        ("GET", "/missing?q=1"),
        ("POST", "/tsa"),
        ("GET", "/big"),
    ]
    assert seen[1][2]["content-type"] == "application/x-test" and seen[1][3] == b"query"


def test_no_answer_is_an_http_failure() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens on it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(HttpFailure, match="refused"):
        http_request(f"http://127.0.0.1:{port}/")
    with pytest.raises(HttpFailure, match="not an http"):
        http_request("ftp://127.0.0.1/file")
    assert issubclass(HttpFailure, OSError)
