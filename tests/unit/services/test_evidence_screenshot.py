"""page.png, the captured page as a picture: taken in Debian's Chromium from the bytes fptrack kept, with the
network blocked (a server the page's links and the page's own URL point to hears nothing), listed in
evidence.json with its SHA-256 and in SHA256SUMS; ``verify`` accepts it and refuses a swapped one; without
Chromium the bundle is made and says it has no picture."""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import io
import json
import shutil
import threading
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.services.evidence import screenshot as screenshot_module
from fptrack.services.evidence.bundle import (
    build_bundle,
    load_signing_key,
    public_key_pem,
    sha256_hex,
    stored_zip,
    verify_bundle,
)
from fptrack.services.evidence.screenshot import SCREENSHOT_WIDTH, one_browser, screenshot_of
from fptrack.storage.exchanges import RawExchange, keep_exchanges
from fptrack.storage.models import Match
from tests.support.admin_seed import seed

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed"),
]


@pytest.fixture
def live_site() -> Iterator[tuple[str, list[str]]]:
    """A server on 127.0.0.1 answering anything with another page, recording every path asked."""
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            body = b"<html><body>THE PAGE AS IT IS NOW</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def _captured(base: str) -> bytes:
    return (
        f'<html><head><title>盗版</title><link rel="stylesheet" href="{base}/style.css">'
        f'<script src="{base}/app.js"></script></head><body><h1>第一章</h1>'
        f'<img src="{base}/cover.png">'
        + "<p>山中有一座小庙，庙里住着一位老和尚。</p>" * 60
        + "</body></html>"
    ).encode()


def test_the_screenshot_shows_the_capture_off_the_network(live_site: tuple[str, list[str]]) -> None:
    base, asked = live_site
    body = _captured(base)
    exchange = RawExchange(
        f"{base}/book/1.html",
        b"",
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\r\n",
        body,
        datetime.now(UTC),
    )
    shot = screenshot_of(exchange, Settings())
    assert shot.png is not None, shot.note
    assert shot.png.startswith(b"\x89PNG\r\n\x1a\n") and shot.source == "the response body kept"
    width, height = int.from_bytes(shot.png[16:20], "big"), int.from_bytes(shot.png[20:24], "big")
    assert width == SCREENSHOT_WIDTH and height > 900  # the whole page, not the window
    assert asked == []  # neither the page's URL nor its stylesheet, script or image was fetched


def test_screenshots_inside_one_browser_start_chromium_once(
    live_site: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A notice's copies each get a bundle with a screenshot: inside :func:`one_browser` they share one
    Chromium (a start costs 2-5 s; a notice of 50 copies started 50), each in a context of its own."""
    base, asked = live_site
    launches: list[str] = []
    launch = screenshot_module._launch

    def counted(playwright: object, chromium: str) -> object:
        launches.append(chromium)
        return launch(playwright, chromium)

    monkeypatch.setattr(screenshot_module, "_launch", counted)
    settings = Settings(evidence_screenshot=True)
    pages = [
        RawExchange(
            f"{base}/book/{n}.html",
            b"",
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\r\n",
            f"<html><body><h1>第{n}章</h1></body></html>".encode(),
            datetime.now(UTC),
        )
        for n in range(3)
    ]
    with one_browser(settings):
        shots = [screenshot_of(page, settings) for page in pages]
    assert all(shot.png is not None for shot in shots), [shot.note for shot in shots]
    assert len({shot.png for shot in shots}) == 3  # each its own page
    assert len(launches) == 1 and asked == []
    assert screenshot_of(pages[0], settings).png is not None  # outside: a browser of its own again
    assert len(launches) == 2


def test_without_chromium_there_is_no_picture_and_a_reason() -> None:
    exchange = RawExchange("http://x/", b"", b"HTTP/1.1 200 OK\r\n\r\n", b"<p>x</p>", datetime.now(UTC))
    shot = screenshot_of(exchange, Settings(chromium="no-such-chromium"))
    assert shot.png is None and "'no-such-chromium' not found" in shot.note


def _bundle_with_screenshot(session: Session, settings: Settings, base: str) -> bytes:
    seeded = seed(session)
    match = session.get(Match, seeded.hostile_match_id)
    assert match is not None
    body = _captured(base)
    match.page.snapshot_sha256 = hashlib.sha256(body).hexdigest()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\n\r\n" % len(
        body
    )
    exchange = RawExchange(match.page.final_url, b"", head, body, datetime(2026, 11, 29, 16, tzinfo=UTC))
    keep_exchanges(session, [(match.page_id, exchange)])
    session.commit()
    return build_bundle(
        session, seeded.hostile_match_id, dataclasses.replace(settings, evidence_screenshot=True)
    )


def test_the_bundle_carries_the_screenshot_and_verify_checks_it(
    session: Session, settings: Settings, live_site: tuple[str, list[str]]
) -> None:
    base, asked = live_site
    data = _bundle_with_screenshot(session, settings, base)
    trusted = public_key_pem(load_signing_key(settings).public_key())
    archive = zipfile.ZipFile(io.BytesIO(data))
    png = archive.read("page.png")
    evidence = json.loads(archive.read("evidence.json"))
    assert evidence["screenshot"]["sha256"] == sha256_hex(png)
    assert "network blocked" in evidence["screenshot"]["shows"]
    assert "not as it is now" in evidence["screenshot"]["shows"]
    assert f"{sha256_hex(png)}  page.png" in archive.read("SHA256SUMS").decode()
    assert "page.png" in archive.read("README.txt").decode()
    result = verify_bundle(data, trusted_key=trusted)
    assert result.ok, result.verdict
    assert any(line.startswith("screenshot: page.png") for line in result.lines)
    assert asked == []

    # another picture in its place, even with SHA256SUMS and the signature made again, fails
    key = load_signing_key(settings)
    files = {info.filename: archive.read(info) for info in archive.infolist()}
    files["page.png"] = png[:-12] + b"\0" * 12
    manifest = "".join(
        f"{sha256_hex(files[name])}  {name}\n"
        for name in ("README.txt", "evidence.json", "page.warc.gz", "signing-key.pub", "page.png")
    ).encode()
    members = [
        (name, files[name]) for name in ("README.txt", "evidence.json", "page.warc.gz", "signing-key.pub")
    ]
    members += [
        ("page.png", files["page.png"]),
        ("SHA256SUMS", manifest),
        ("SHA256SUMS.sig", key.sign(manifest)),
    ]
    swapped = verify_bundle(stored_zip(members), trusted_key=trusted)
    assert swapped.failure == "page.png is not the screenshot evidence.json describes"


def test_a_bundle_without_chromium_says_it_has_no_picture(
    session: Session, settings: Settings, live_site: tuple[str, list[str]]
) -> None:
    base, _ = live_site
    data = _bundle_with_screenshot(session, dataclasses.replace(settings, chromium="no-such-chromium"), base)
    archive = zipfile.ZipFile(io.BytesIO(data))
    assert "page.png" not in archive.namelist()
    evidence = json.loads(archive.read("evidence.json"))
    assert evidence["screenshot"].startswith("not made: not taken: 'no-such-chromium' not found")
    assert "page.png        not made" in archive.read("README.txt").decode()
    trusted = public_key_pem(load_signing_key(settings).public_key())
    assert verify_bundle(data, trusted_key=trusted).ok
