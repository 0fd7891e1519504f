"""crawler.parse reads downloads (docs/downloads.md): a text file in any encoding, an archive, an e-book, sent
under a file type, as an attachment or as octet-stream, becomes a page whose text is what the file holds."""

from __future__ import annotations

import io
import zipfile
from datetime import UTC, datetime

import pytest
from scrapy.http import Response

from fptrack.crawler.middlewares import SkipBinaryBodies
from fptrack.crawler.parse import parse_response
from fptrack.fingerprint.containers import ContainerLimits, member_at

NOW = datetime(2026, 11, 29, tzinfo=UTC)
BOOK = "第一章 山雨欲来\n天下大势，  分久必合。\n\n第二章 风满楼\n话说那日风雨交加。"
TIDY = "第一章 山雨欲来\n天下大势， 分久必合。\n第二章 风满楼\n话说那日风雨交加。"


def _parse(url: str, body: bytes, headers: dict[str, str], **options: object):  # type: ignore[no-untyped-def]
    response = Response(url, body=body, headers=headers)
    return parse_response(response, requested_url=url, fetched_at=NOW, **options).page  # type: ignore[arg-type]


def _zip(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be", "utf-32"])
def test_a_text_file_with_a_wide_bom_and_no_charset_is_read(codec: str) -> None:
    body = "\ufeff".encode(codec) + BOOK.encode(codec) if codec.endswith("be") else BOOK.encode(codec)
    page = _parse("http://x/ch1.txt", body, {"Content-Type": "text/plain"})
    assert (page.text, page.error) == (TIDY, "")


@pytest.mark.parametrize(
    "headers",
    [
        {"Content-Type": "application/zip"},
        {"Content-Type": "application/octet-stream"},
        {"Content-Type": "text/plain", "Content-Disposition": "attachment; filename=book.zip"},
        {},
    ],
)
def test_a_zipped_book_is_read_whatever_its_headers(headers: dict[str, str]) -> None:
    page = _parse("http://x/down?id=1", _zip("书/全本.txt", BOOK.encode("gb18030")), headers)
    assert page.text == "=== file: 书/全本.txt ===\n" + TIDY
    assert page.note == "download: zip, 1 text(s) read (text)"
    assert member_at(page.text, page.text.index("话说")) == "书/全本.txt"


def test_a_download_has_its_own_text_cap_and_limits() -> None:
    body = _zip("a.txt", ("天下大势\n" * 1000).encode())
    page = _parse(
        "http://x/a.zip",
        body,
        {"Content-Type": "application/zip"},
        max_chars=10,
        max_file_chars=100,
        file_limits=ContainerLimits(max_member_bytes=650),
    )
    assert len(page.text) <= 100
    assert "a.txt: cut at 650 bytes (the member size cap)" in page.note
    assert "over the 100-character cap" in page.note


def test_the_download_name_comes_from_content_disposition() -> None:
    page = _parse(
        "http://x/get?id=9",
        BOOK.encode("utf-8"),
        {
            "Content-Type": "application/octet-stream",
            "Content-Disposition": "attachment; filename*=UTF-8''%E5%85%A8.txt",
        },
    )
    assert (page.title, page.text) == ("全.txt", TIDY)


def test_downloads_are_no_longer_stopped_at_their_headers() -> None:
    from scrapy.exceptions import StopDownload
    from scrapy.http import Headers, Request

    class Stats:
        def inc_value(self, key: str) -> None:
            pass

    skip = SkipBinaryBodies(Stats())
    for mime in ("application/zip", "application/epub+zip", "application/pdf", "application/x-7z-compressed"):
        skip.headers_received(Headers({"Content-Type": mime}), 10, Request("http://x/a"), None)
    with pytest.raises(StopDownload):
        skip.headers_received(Headers({"Content-Type": "image/png"}), 10, Request("http://x/a"), None)


def test_a_download_not_read_whole_is_one_line_for_the_summary() -> None:
    from fptrack.crawler.parse import download_problem

    whole = _parse("http://x/a.zip", _zip("a.txt", BOOK.encode()), {"Content-Type": "application/zip"})
    broken = _parse("http://x/b.zip", b"PK\x03\x04broken", {"Content-Type": "application/zip"})
    cut = _parse(
        "http://x/c.zip",
        _zip("c.txt", ("天下大势\n" * 1000).encode()),
        {"Content-Type": "application/zip"},
        file_limits=ContainerLimits(max_member_bytes=650),
    )
    chapter = _parse("http://x/1.html", b"<html><body><p>x</p></body></html>", {"Content-Type": "text/html"})
    assert download_problem(whole) == "" and download_problem(chapter) == ""
    assert download_problem(broken) == broken.error and broken.error.startswith("download: zip: no text")
    assert (
        download_problem(cut)
        == "download: zip, 1 text(s) read (text); c.txt: cut at 650 bytes (the member size cap)"
    )


def test_a_page_served_as_a_file_is_read_as_the_page_it_is() -> None:
    markup = (
        "<!DOCTYPE html><html><head><title>第一章</title></head><body><div id='content'>"
        "<p>天下大势，分久必合。</p></div></body></html>"
    )
    page = _parse("http://x/1.html", markup.encode("utf-8"), {"Content-Type": "application/octet-stream"})
    assert "<" not in page.text and "天下大势" in page.text
    assert not page.note.startswith("download: ")
