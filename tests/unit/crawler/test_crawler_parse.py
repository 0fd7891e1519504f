"""From a Scrapy response to a CrawledPage: charsets (declared, meta, none, lying), statuses, binaries."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import pytest
from scrapy.http import HtmlResponse, Response, TextResponse
from twisted.internet import error as net

from fptrack.crawler.parse import (
    charset_from_content_type,
    charset_from_meta,
    describe_failure,
    is_binary_media_type,
    parse_response,
)
from testbed.sites import as_served, render_chapter

PARAGRAPHS = [
    "河面上起了风，渡船摇得厉害，老周把缆绳又绕了两圈。",
    "对岸的灯一盏一盏亮起来，像是有人在数着什么。",
]
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
URL = "http://novel.test/book/1/2.html"


def _parse(
    body: bytes, content_type: str | None = "text/html", *, status: int = 200, cls: type = HtmlResponse
):
    headers = {"Content-Type": content_type} if content_type is not None else {}
    response = cls(URL, body=body, headers=headers, status=status)
    return parse_response(response, requested_url=URL, fetched_at=NOW)


@pytest.mark.parametrize(
    ("encoding", "header", "meta", "expected"),
    [
        ("utf-8", True, True, "utf-8"),
        ("utf-8", False, False, "utf-8"),
        ("gbk", True, False, "gb18030"),
        ("gbk", False, True, "gb18030"),
        ("gbk", False, False, "gb18030"),
        ("gb2312", True, True, "gb18030"),
        ("big5", True, True, "big5"),
        ("big5", False, True, "big5"),
        ("big5", False, False, "big5"),
    ],
)
def test_charsets_declared_in_header_meta_or_nowhere(
    encoding: str, header: bool, meta: bool, expected: str
) -> None:
    paragraphs = PARAGRAPHS if encoding != "gb2312" else PARAGRAPHS[:1]
    body = render_chapter("第二章 渡口", paragraphs, encoding=encoding, meta_charset=meta)
    parsed = _parse(body, f"text/html; charset={encoding}" if header else "text/html")
    assert parsed.page.encoding == expected
    assert parsed.page.text.split("\n") == [as_served(p, encoding) for p in paragraphs]
    assert parsed.page.error == ""


@pytest.mark.parametrize(
    ("actual", "claimed"),
    [("gbk", "big5"), ("big5", "gbk"), ("utf-8", "gbk"), ("gbk", "utf-8"), ("gbk", "latin-1")],
)
def test_pages_that_lie_about_their_charset(actual: str, claimed: str) -> None:
    body = render_chapter("第二章 渡口", PARAGRAPHS, encoding=actual, meta_charset=False)
    parsed = _parse(body, f"text/html; charset={claimed}")
    assert parsed.page.text.split("\n") == [as_served(p, actual) for p in PARAGRAPHS]


def test_header_charset_wins_over_meta_when_both_decode() -> None:
    body = render_chapter("第二章", PARAGRAPHS, encoding="gbk", meta_charset=False)
    body = body.replace(b"<head>", b'<head><meta charset="utf-8">')  # a stale template meta
    assert _parse(body, "text/html; charset=gbk").page.encoding == "gb18030"


def test_page_fields() -> None:
    body = render_chapter("第二章 渡口", PARAGRAPHS)
    response = HtmlResponse(URL, body=body, headers={"Content-Type": "text/html; charset=utf-8"})
    page = parse_response(response, requested_url="http://novel.test/old", fetched_at=NOW).page
    assert (page.url, page.final_url, page.status) == ("http://novel.test/old", URL, 200)
    assert page.title == "第二章 渡口_某书_书友小说网"
    assert page.content_sha256 == hashlib.sha256(page.text.encode("utf-8")).hexdigest()
    assert page.snapshot_sha256 == hashlib.sha256(body).hexdigest()
    assert page.fetched_at == NOW


def test_links_come_from_html_pages() -> None:
    parsed = _parse(render_chapter("第二章", PARAGRAPHS))
    assert "http://novel.test/book/1/next.html" in parsed.links
    assert "http://novel.test/" in parsed.links


@pytest.mark.parametrize("status", [301, 403, 404, 410, 500, 503])
def test_non_200_statuses_have_no_text_and_no_links(status: int) -> None:
    parsed = _parse(render_chapter("第二章", PARAGRAPHS), "text/html; charset=utf-8", status=status)
    assert parsed.page.status == status
    assert (parsed.page.text, parsed.page.encoding, parsed.links) == ("", "", ())
    assert parsed.page.error == f"HTTP {status}"
    assert parsed.page.content_sha256 == hashlib.sha256(b"").hexdigest()


@pytest.mark.parametrize(
    ("body", "content_type", "error"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "image/png", "binary content (image/png)"),
        # downloads are read (fingerprint.containers); a damaged one says why it gave no text
        (
            b"PK\x03\x04\x14\x00\x00\x00",
            "application/zip",
            "download: zip: no text (the file: damaged or unreadable zip (File is not a zip file))",
        ),
        (
            b"%PDF-1.4\n%\xe2\xe3\xcf\xd3",
            "application/pdf",
            "download: pdf: no text (the file: damaged or unreadable pdf (Stream has ended unexpectedly))",
        ),
        (b'{"a": 1}', "application/json", "not text (application/json)"),
        (b"\x00\x01\x02\x03" * 400, "text/html", "binary content (text/html)"),
        (b"\x00\x01\x02\x03" * 400, None, "binary content (no content type)"),
        (b"", "text/html", "empty body"),
        (b"  \r\n ", "text/html; charset=utf-8", "empty body"),
    ],
)
def test_bodies_without_text(body: bytes, content_type: str | None, error: str) -> None:
    parsed = _parse(body, content_type, cls=Response)
    assert (parsed.page.text, parsed.page.error) == ("", error)
    assert parsed.page.snapshot_sha256 == hashlib.sha256(body).hexdigest()


def test_undecodable_text_says_so() -> None:
    garbage = bytes(range(0x80, 0x100)) * 20
    parsed = _parse(garbage, "text/html")
    assert parsed.page.text == ""
    assert parsed.page.error.startswith("undecodable")


def test_plain_text_bodies_keep_their_lines() -> None:
    body = ("\r\n\u3000\u3000".join(PARAGRAPHS) + "\r\n\r\n").encode("gbk")
    parsed = _parse(body, "text/plain", cls=TextResponse)
    assert parsed.page.text.split("\n") == PARAGRAPHS
    assert parsed.page.encoding == "gb18030"
    assert parsed.links == ()


def test_missing_content_type_is_sniffed_as_html() -> None:
    parsed = _parse(render_chapter("第二章", PARAGRAPHS), None, cls=Response)
    assert parsed.page.text.split("\n") == PARAGRAPHS


def test_a_few_stray_nul_bytes_do_not_make_a_page_binary() -> None:
    body = render_chapter("第二章", PARAGRAPHS).replace("。".encode(), "。\x00".encode(), 1)
    assert _parse(body, "text/html; charset=utf-8").page.text.split("\n") == PARAGRAPHS


def test_charset_helpers() -> None:
    assert charset_from_content_type("text/html; charset=GBK") == "GBK"
    assert charset_from_content_type('text/html; Charset="big5"') == "big5"
    assert charset_from_content_type("text/html") is None
    assert charset_from_meta(b'<html><head><meta charset="gb2312">') == "gb2312"
    assert charset_from_meta(b"<meta http-equiv='Content-Type' content='text/html; charset=big5'>") == "big5"
    assert charset_from_meta(b"<html><head><title>x</title>") is None
    assert charset_from_meta(b" " * 5000 + b'<meta charset="gbk">') is None  # only the document's start
    assert is_binary_media_type("image/webp") and is_binary_media_type("application/x-msdownload")
    assert not is_binary_media_type("application/octet-stream")  # a download, read
    assert not is_binary_media_type("text/html")


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (net.ConnectionRefusedError(), "connection refused"),
        (net.DNSLookupError("nx.invalid"), "DNS lookup failed (no such host)"),
        (net.TimeoutError(), "timed out after 2.5 s"),
        (net.TCPTimedOutError(), "timed out after 2.5 s"),
        (ValueError("strange thing"), "ValueError: strange thing"),
    ],
)
def test_failure_reasons_read_well(error: BaseException, reason: str) -> None:
    assert describe_failure(error, timeout=2.5) == reason


def test_scrapy_wrapped_errors_read_well() -> None:
    from scrapy import exceptions

    if not hasattr(exceptions, "DownloadConnectionRefusedError"):
        pytest.skip("Scrapy < 2.13 raises Twisted's errors directly")
    assert describe_failure(exceptions.DownloadConnectionRefusedError("x")) == "connection refused"
    assert describe_failure(exceptions.CannotResolveHostError("x")) == "DNS lookup failed (no such host)"
    assert describe_failure(exceptions.DownloadTimeoutError("x"), timeout=20) == "timed out after 20 s"
    cancelled = exceptions.DownloadCancelledError(
        "expected response size (99) larger than download max size (9)"
    )
    assert describe_failure(cancelled) == "larger than 9 bytes (the download size cap): 99 bytes announced"
    chunked = exceptions.DownloadCancelledError()
    assert describe_failure(chunked, max_bytes=9, received=12) == (
        "larger than 9 bytes (the download size cap): stopped after 12 bytes"
    )
    assert describe_failure(chunked, max_bytes=9, received=5) == "download cancelled"


def test_mixed_encodings_keep_the_body() -> None:
    # A UTF-8 page with one ad line pasted in as GBK: the damaged line may be garbled, the body is not.
    body = render_chapter("第二章", PARAGRAPHS)
    marker = b"<div id='content'>"
    mixed = body.replace(marker, marker + "广告：下载阅读器".encode("gbk") + b"<br>")
    parsed = _parse(mixed, "text/html")
    assert parsed.page.encoding == "utf-8"
    assert parsed.page.text.split("\n")[-2:] == PARAGRAPHS


def test_huge_pages_are_parsed_whole() -> None:
    body = render_chapter("第二章", PARAGRAPHS * 20_000)  # about 2.5 MB of text
    parsed = _parse(body, "text/html; charset=utf-8")
    assert parsed.page.text.count("\n") == 2 * 20_000 - 1
