"""A downloaded file has a size cap of its own (FPTRACK_DOWNLOAD_MAX_BYTES, default 200 MiB) while a page
keeps FPTRACK_CRAWL_MAX_BYTES (10 MiB): known from the response's head (a file's type, an attachment) or its
URL's extension, before the body comes. A 20 MiB zipped book is read; a file announcing 300 MiB is refused
with one line, before its body is held; an 11 MiB HTML page is still refused. The re-check's fetcher does the
same."""

from __future__ import annotations

import io
import os
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from fptrack.core.settings import Settings
from fptrack.crawler.guard import PrivateAddressPolicy
from fptrack.crawler.guarded_http import FetchFailure, GuardedFetcher
from tests.integration.crawler.harness import PARAGRAPHS, crawl_in_child

pytestmark = pytest.mark.slow

MIB = 1024 * 1024
BOOK = "第一章 山谷\n" + "\n".join(PARAGRAPHS * 20)


def _big_zip() -> bytes:
    """A zipped book padded to 20 MiB by a stored member of random bytes (a picture, say)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("全本.txt", BOOK.encode("gb18030"), zipfile.ZIP_DEFLATED)
        archive.writestr("cover.jpg", os.urandom(20 * MIB), zipfile.ZIP_STORED)
    return buffer.getvalue()


class _Handler(BaseHTTPRequestHandler):
    files: ClassVar[dict[str, tuple[str, bytes]]] = {}
    sent: ClassVar[dict[str, int]] = {}

    def do_GET(self) -> None:
        if self.path == "/huge.zip":  # announces 300 MiB and sends zeros until the client hangs up
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(300 * MIB))
            self.end_headers()
            block = bytes(MIB)
            try:
                for _ in range(300):
                    self.wfile.write(block)
                    self.sent["/huge.zip"] = self.sent.get("/huge.zip", 0) + len(block)
            except OSError:
                pass
            return
        content_type, body = self.files.get(self.path, ("text/plain", b""))
        self.send_response(200 if self.path in self.files else 404)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def _site() -> Iterator[str]:
    links = "".join(f'<a href="{path}">{path}</a>' for path in ("/down?id=1", "/huge.zip", "/big.html"))
    _Handler.files = {
        "/": ("text/html; charset=utf-8", f"<html><body>{links}</body></html>".encode()),
        "/down?id=1": ("application/zip", _big_zip()),
        "/big.html": (
            "text/html; charset=utf-8",
            b"<html><body><p>" + b"x" * (11 * MIB) + b"</p></body></html>",
        ),
    }
    _Handler.sent = {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_file_has_its_own_size_cap_and_a_page_keeps_its_own() -> None:
    with _site() as site:
        result = crawl_in_child([site + "/"], depth=1, timeout=120)
    book = result.page(site + "/down?id=1")
    assert book["text"].startswith("=== file: 全本.txt ===\n第一章 山谷\n" + PARAGRAPHS[0])
    page_size = len(_Handler.files["/big.html"][1])
    file_cap = "a file's size cap, FPTRACK_DOWNLOAD_MAX_BYTES"
    assert sorted(result.stats["failures"]) == [
        [
            site + "/big.html",
            f"larger than {10 * MIB} bytes (the download size cap): {page_size} bytes announced",
        ],
        [site + "/huge.zip", f"larger than {200 * MIB} bytes ({file_cap}): {300 * MIB} bytes announced"],
    ]
    assert _Handler.sent.get("/huge.zip", 0) < 300 * MIB  # the client hung up: the body was never fetched
    # the crawling child's own peak memory (not ru_maxrss of the children, the largest of every child this
    # test process ever waited for): the 20 MiB file read, the 300 MiB one never held
    assert 0 < result.peak_kib < 400 * 1024


def test_the_file_cap_is_a_setting() -> None:
    with _site() as site:
        result = crawl_in_child([site + "/"], depth=1, timeout=120, settings={"download_max_bytes": 5 * MIB})
    failures = dict(map(tuple, result.stats["failures"]))
    assert failures[site + "/down?id=1"].startswith(
        f"larger than {5 * MIB} bytes (a file's size cap, FPTRACK_DOWNLOAD_MAX_BYTES)"
    )


def test_the_recheck_fetcher_keeps_the_two_caps() -> None:
    with _site() as site:
        key = site.removeprefix("http://")
        fetcher = GuardedFetcher(
            Settings(), PrivateAddressPolicy.from_entries([key]), lambda key: (0.0, False)
        )
        assert fetcher.fetch(site + "/down?id=1").body == _Handler.files["/down?id=1"][1]
        with pytest.raises(FetchFailure, match=r"\(FPTRACK_DOWNLOAD_MAX_BYTES\): 314572800 bytes announced"):
            fetcher.fetch(site + "/huge.zip")
        with pytest.raises(FetchFailure, match=r"\(FPTRACK_CRAWL_MAX_BYTES\)"):
            fetcher.fetch(site + "/big.html")
