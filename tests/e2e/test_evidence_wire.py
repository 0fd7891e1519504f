"""End to end, the WARC as received: a server on 127.0.0.1 (a port of its own) answers a copy gzip-coded with
``200 Fine Thanks``; ``fptrack crawl`` flags it, ``fptrack evidence bundle`` packs it, and out of the bundle
come, byte for byte, the status line, the headers (``Content-Encoding: gzip`` kept), the gzip payload the
server sent and the request head the server received (``Host`` with its port), with ``WARC-IP-Address`` and
a ``warcinfo`` naming the software, its version, the operator and the user agent; beside the WARC, page.png.
``warcio check`` accepts the WARC and ``fptrack evidence verify`` finds the snapshot by undoing the gzip."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import socketserver
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from fptrack import __version__
from fptrack.cli.demo import DEMO_DATA, demo_chapters
from testbed.sites import chapter_page

pytestmark = pytest.mark.slow

COPY = chapter_page(
    "第一章",
    [line for line in demo_chapters("lighthouse.txt")[0].split("\n") if line.strip()],
    template="biquge",
).body
CODED = gzip.compress(COPY, mtime=0)
RESPONSE_HEAD = (
    b"HTTP/1.1 200 Fine Thanks\r\n"
    b"Content-Type: text/html; charset=utf-8\r\n"
    b"Content-Encoding: gzip\r\n"
    b"X-Served-By: wire-test\r\n"
    b"Content-Length: %d\r\n\r\n" % len(CODED)
)
# another chapter, gzip-coded and sent in chunks: the WARC holds it with the chunks joined, still gzip
CHUNKED_CODED = gzip.compress(
    chapter_page(
        "第二章",
        [line for line in demo_chapters("lighthouse.txt")[1].split("\n") if line.strip()],
        template="biquge",
    ).body,
    mtime=0,
)
CHUNKED = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Encoding: gzip\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
    + b"".join(
        b"%x\r\n%s\r\n" % (len(piece), piece)
        for piece in (CHUNKED_CODED[i : i + 500] for i in range(0, len(CHUNKED_CODED), 500))
    )
    + b"0\r\n\r\n"
)
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 9\r\n\r\nnot found"


@dataclass
class WireServer:
    """A loopback HTTP/1.1 server writing its answers byte by byte as given, and keeping each request head it
    read, as read."""

    port: int = 0
    heads: list[bytes] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def wire_server() -> Iterator[WireServer]:
    state = WireServer()

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            while True:  # keep-alive: requests one after the other on the connection
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = self.rfile.readline(65536)
                    if not line:
                        return
                    head += line
                state.heads.append(head)
                path = head.split(b" ", 2)[1]
                answers = {b"/copy.html": RESPONSE_HEAD + CODED, b"/chunked.html": CHUNKED}
                self.wfile.write(answers.get(path, NOT_FOUND))
                self.wfile.flush()

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    with Server(("127.0.0.1", 0), Handler) as server:
        state.port = server.server_address[1]
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield state
        finally:
            server.shutdown()


def test_the_warc_holds_the_exchange_as_it_came_over_the_wire(fptrack, tmp_path: Path) -> None:
    fptrack.run("init")
    fptrack.run("works", "add", str(DEMO_DATA / "lighthouse.txt"))
    fptrack.extra_env["FPTRACK_EVIDENCE_OPERATOR"] = "Lighthouse Rights Ltd., enforcement"
    fptrack.extra_env["FPTRACK_USER_AGENT"] = "fptrack-wire-test/1.0"
    fptrack.extra_env["FPTRACK_EVIDENCE_SCREENSHOT"] = "true"
    with wire_server() as server:
        url, chunked_url = server.base + "/copy.html", server.base + "/chunked.html"
        allow = f"127.0.0.1:{server.port}"
        fptrack.run("crawl", url, chunked_url, "--allow-private-host", allow, "--depth", "0", "--quiet")
    [match] = [m for m in fptrack.matches() if m["page_url"] == url]
    [sent] = [head for head in server.heads if head.startswith(b"GET /copy.html ")]
    assert f"Host: 127.0.0.1:{server.port}\r\n".encode() in sent

    output = tmp_path / "bundle.zip"
    fptrack.run("evidence", "bundle", "--match", str(match["id"]), "-o", str(output))
    archive = zipfile.ZipFile(io.BytesIO(output.read_bytes()))
    warc = archive.read("page.warc.gz")
    evidence = json.loads(archive.read("evidence.json"))

    records = {}
    for record in ArchiveIterator(io.BytesIO(warc)):
        http_head = b"" if record.http_headers is None else record.http_headers.to_bytes()
        records[record.rec_type] = (record, http_head, record.raw_stream.read())
    response, response_head, payload = records["response"]
    _, request_head, _ = records["request"]
    # the response as sent: the status line with its reason, every header (their order but Content-Length's,
    # which Twisted consumes and Scrapy puts first), the gzip payload itself
    status_line, *header_lines = RESPONSE_HEAD.split(b"\r\n")
    assert response_head.startswith(status_line + b"\r\n") and response_head.endswith(b"\r\n\r\n")
    assert sorted(response_head.split(b"\r\n")[1:]) == sorted(header_lines)
    assert payload == CODED
    assert (
        response.rec_headers.get_header("WARC-Payload-Digest")
        == "sha256:" + hashlib.sha256(CODED).hexdigest()
    )
    assert response.rec_headers.get_header("WARC-IP-Address") == "127.0.0.1"
    # the snapshot is the payload decoded
    assert hashlib.sha256(gzip.decompress(payload)).hexdigest() == evidence["page"]["snapshot_sha256"]
    # the request as the server read it
    assert request_head == sent
    info = records["warcinfo"][2].decode()
    assert f"software: fptrack/{__version__} (Scrapy/" in info
    assert "operator: Lighthouse Rights Ltd., enforcement" in info
    assert "http-header-user-agent: fptrack-wire-test/1.0" in info
    assert "format: WARC File Format 1.1" in info and "conformsTo: " in info

    warc_file = tmp_path / "page.warc.gz"
    warc_file.write_bytes(warc)
    checked = subprocess.run(
        [sys.executable, "-m", "warcio.cli", "check", "-v", str(warc_file)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    verified = fptrack.run("evidence", "verify", str(output), check=False)
    assert "response payload" in verified.stdout and "content coding undone" in verified.stdout, (
        verified.stdout + verified.stderr
    )
    assert "FAILED" not in verified.stdout + verified.stderr
    # and a picture of the capture for those who cannot read a WARC
    assert archive.read("page.png").startswith(b"\x89PNG") and "screenshot: page.png" in verified.stdout

    # sent in chunks: the payload is the gzip stream with the chunks joined (the transfer coding undone, the
    # content coding kept); Transfer-Encoding, which Twisted consumes, is not claimed
    [chunked_match] = [m for m in fptrack.matches() if m["page_url"] == chunked_url]
    chunked_output = tmp_path / "chunked.zip"
    fptrack.run("evidence", "bundle", "--match", str(chunked_match["id"]), "-o", str(chunked_output))
    chunked_warc = zipfile.ZipFile(io.BytesIO(chunked_output.read_bytes())).read("page.warc.gz")
    [(chunked_head, chunked_payload)] = [
        (r.http_headers, r.raw_stream.read())  # read as it goes by: the iterator moves past it
        for r in ArchiveIterator(io.BytesIO(chunked_warc))
        if r.rec_type == "response"
    ]
    assert chunked_head.get_header("Content-Encoding") == "gzip"
    assert chunked_head.get_header("Transfer-Encoding") is None
    assert chunked_payload == CHUNKED_CODED
    verified = fptrack.run("evidence", "verify", str(chunked_output), check=False)
    assert "content coding undone" in verified.stdout, verified.stdout + verified.stderr
