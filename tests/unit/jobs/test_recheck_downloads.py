"""A re-check reads a downloaded file as the crawl did: within the settings' caps on downloads
(FPTRACK_DOWNLOAD_*), not the library's defaults (docs/downloads.md)."""

from __future__ import annotations

import io
import zipfile
from datetime import UTC, datetime

from fptrack.core.settings import Settings
from fptrack.crawler.guarded_http import FetchResult
from fptrack.jobs.rechecks import read_response

NOW = datetime(2026, 11, 29, tzinfo=UTC)
CHAPTER = "第一章 山雨欲来\n" + "天下大势，分久必合，合久必分。\n" * 400


def _zipped(members: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in members.items():
            archive.writestr(name, text.encode("gb18030"))
    return buffer.getvalue()


def _read(body: bytes, settings: Settings) -> str | None:
    result = FetchResult(
        url="http://127.0.0.1:9/book.zip",
        final_url="http://127.0.0.1:9/book.zip",
        status=200,
        headers={"content-type": "application/zip"},
        body=body,
    )
    return read_response(result, settings=settings, fetched_at=NOW).text


def test_a_recheck_keeps_the_settings_cap_on_a_downloads_text() -> None:
    body = _zipped({"全本.txt": CHAPTER})
    assert _read(body, Settings()) == "=== file: 全本.txt ===\n" + CHAPTER.strip()
    text = _read(body, Settings(download_max_chars=500))
    assert text is not None and 0 < len(text) <= 500


def test_a_recheck_keeps_the_settings_cap_on_members() -> None:
    body = _zipped({f"{number:03}.txt": CHAPTER for number in range(1, 6)})
    text = _read(body, Settings(download_max_members=2)) or ""
    assert text.count("=== file: ") == 2
    assert (_read(body, Settings()) or "").count("=== file: ") == 5


def test_a_recheck_of_a_chapter_drawn_as_images_cannot_tell_and_never_says_removed() -> None:
    """The crawl read the page's chapter from its images (OCR); a re-check does not, and the page's short
    text is not a removal."""
    body = (
        "<html><body><h1>第一章 山雨欲来</h1><div id='chaptercontent'><img src='/img/1.png'>"
        "<img src='/img/2.png'></div><a href='/'>目录</a> <a href='/2.html'>下一章</a></body></html>"
    ).encode()
    result = FetchResult(
        url="http://127.0.0.1:9/1.html",
        final_url="http://127.0.0.1:9/1.html",
        status=200,
        headers={"content-type": "text/html; charset=utf-8"},
        body=body,
    )
    read = read_response(result, settings=Settings(), fetched_at=NOW)
    assert read.text is None and read.outcome == "error" and "drawn as images" in read.detail
    # with OCR off, the page is read as any page (its short text judged as it was before)
    plain = read_response(result, settings=Settings(ocr_max_images=0), fetched_at=NOW)
    assert plain.outcome != "error" and plain.text is not None
