"""A loopback web site whose pages change while it runs, and that honours conditional requests.

::

    with serve_live_site({"/1.html": "<html>...</html>"}) as site:   # site.base = 'http://127.0.0.1:<port>'
        site.set("/1.html", "<html>edited</html>")                  # a new ETag and Last-Modified
        site.remove("/1.html")                                      # 404 from now on (410 with status=410)
        site.requests                                               # [(path, {header: value}), ...]

Every page has an ``ETag`` (a hash of its body) and a ``Last-Modified`` (when it was last set, to the second);
``If-None-Match`` naming the current ETag, or (without ``If-None-Match``) an ``If-Modified-Since`` not older
than ``Last-Modified``, gets ``304 Not Modified`` with no body (RFC 9110, section 13.2.2).
``conditional=False`` serves the validators but ignores the conditions (a server that always answers in full).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.utils import formatdate, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["LiveSite", "serve_live_site"]


@dataclass
class _Entry:
    body: bytes
    etag: str
    modified: float


@dataclass
class LiveSite:
    base: str = ""
    conditional: bool = True
    robots: str = ""
    pages: dict[str, _Entry] = field(default_factory=dict)
    gone: dict[str, int] = field(default_factory=dict)  # path -> status of a removed page
    redirects: dict[str, str] = field(default_factory=dict)  # path -> Location (302)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    answers: list[tuple[str, int]] = field(default_factory=list)  # (path, status) of every response
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str) -> str:
        return self.base + path

    @property
    def key(self) -> str:
        return self.base.split("://", 1)[1]

    def set(self, path: str, markup: str, *, modified: float | None = None) -> None:
        body = markup.encode("utf-8")
        with self.lock:
            self.gone.pop(path, None)
            self.pages[path] = _Entry(
                body, '"' + hashlib.sha256(body).hexdigest()[:16] + '"', modified or time.time()
            )

    def remove(self, path: str, *, status: int = 404) -> None:
        with self.lock:
            self.pages.pop(path, None)
            self.gone[path] = status

    def redirect(self, path: str, location: str) -> None:
        with self.lock:
            self.pages.pop(path, None)
            self.redirects[path] = location

    def page_requests(self) -> list[tuple[str, dict[str, str]]]:
        with self.lock:
            return [(path, headers) for path, headers in self.requests if path != "/robots.txt"]

    def statuses(self, path: str) -> list[int]:
        """The statuses answered to requests of ``path``, in order."""
        with self.lock:
            return [status for answered, status in self.answers if answered == path]


def _handler(site: LiveSite) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            path = self.path
            headers = {name.lower(): value for name, value in self.headers.items()}
            with site.lock:
                site.requests.append((path, headers))
                entry = site.pages.get(path)
                gone = site.gone.get(path, 404)
                location = site.redirects.get(path)
            if location is not None:
                self._send(302, b"", {"Location": location})
                return
            if path == "/robots.txt" and site.robots:
                self._send(200, site.robots.encode(), {"Content-Type": "text/plain"})
                return
            if entry is None:
                self._send(gone, b"<html><body><h1>Not Found</h1></body></html>", {})
                return
            validators = {"ETag": entry.etag, "Last-Modified": formatdate(entry.modified, usegmt=True)}
            if site.conditional and self._not_modified(headers, entry):
                self._send(304, b"", validators)
                return
            self._send(200, entry.body, {**validators, "Content-Type": "text/html; charset=utf-8"})

        def _not_modified(self, headers: Mapping[str, str], entry: _Entry) -> bool:
            if "if-none-match" in headers:
                return entry.etag in [tag.strip() for tag in headers["if-none-match"].split(",")]
            since = headers.get("if-modified-since")
            if since:
                try:
                    return parsedate_to_datetime(since).timestamp() >= int(entry.modified)
                except (TypeError, ValueError):
                    return False
            return False

        def _send(self, status: int, body: bytes, headers: Mapping[str, str]) -> None:
            with site.lock:
                site.answers.append((self.path, status))
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            if status != 304:
                self.send_header("Content-Length", str(len(body)))  # 304 has no body, no length
            self.end_headers()
            if status != 304:
                self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@contextmanager
def serve_live_site(
    pages: Mapping[str, str] | None = None, *, conditional: bool = True, robots: str = ""
) -> Iterator[LiveSite]:
    """Serve ``pages`` (path -> HTML) on a free port of 127.0.0.1 for the ``with`` block; they may change."""
    site = LiveSite(conditional=conditional, robots=robots)
    for path, markup in (pages or {}).items():
        site.set(path, markup)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(site))
    server.daemon_threads = True
    site.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
