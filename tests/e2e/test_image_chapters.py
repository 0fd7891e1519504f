"""End to end: `fptrack crawl` of a loopback reader site whose chapters are drawn as images (图片章节) reads
them by OCR (Tesseract) and finds the registered chapter on the page's URL; an ordinary text chapter has none
of its images fetched; an image page of unregistered text gives no match; a broken and a huge image give one
line in the crawl's summary and the page is kept; a scanned PDF (page images, no text layer) is read by
OCR too."""

from __future__ import annotations

import struct
import zlib

import pytest

from fptrack.compare.chapters import split_chapters
from fptrack.fingerprint.ocr import tesseract_path
from testbed.images import chapter_png
from testbed.sites import Page, serve_site
from tests.support.books import book

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        tesseract_path() is None, reason="tesseract is installed by deploy/ensure-services.sh"
    ),
]

BOOK = book(201, 4, length=500, title="月下孤城")
OTHER = book(202, 2, length=500, title="无人知晓")  # never registered


def _chapter(text: str, index: int) -> tuple[str, str]:
    span = next(s for s in split_chapters(text) if s.index == index)
    heading, body = text[span.start : span.end].split("\n", 1)
    return heading, body


def _image_page(title: str, images: list[str]) -> Page:
    tags = "".join(f'<img src="{src}" alt="">' for src in images)
    return Page.html(
        "<html><head><title>" + title + "</title></head><body>"
        '<div class="header"><img src="/logo.png" class="logo"></div>'
        f'<h1>{title}</h1><div id="chaptercontent">{tags}</div>'
        '<div class="bottem"><a href="/">目录</a> <a href="/c/2.html">下一章</a></div></body></html>'
    )


def _huge_png() -> bytes:
    """A PNG whose header says 100,000 x 100,000 pixels (its data is a few bytes): refused unread."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + chunk(b"IEND", b"")
    )


def test_an_image_chapter_is_read_by_ocr_and_matched(fptrack, tmp_path) -> None:
    heading, body = _chapter(BOOK, 2)
    lines = body.splitlines()
    half = len(lines) // 2
    first, second = chapter_png("\n".join(lines[:half])), chapter_png("\n".join(lines[half:]), noise=0.002)
    text_heading, text_body = _chapter(BOOK, 3)
    paragraphs = "".join(f"<p>{line}</p>" for line in text_body.splitlines())
    ordinary = Page.html(
        f"<html><body><h1>{text_heading}</h1><div id='content'>{paragraphs}"
        "<img src='/img/ordinary.png' width='600' height='800'></div></body></html>"
    )
    pages = {
        "/": Page.html(
            "<html><body><h1>月下孤城 目录</h1><ul>"
            + "".join(f'<li><a href="/c/{n}.html">第{n}章</a></li>' for n in range(1, 5))
            + '<li><a href="/scan.pdf">第四章 (PDF)</a></li>'
            + "</ul></body></html>"
        ),
        "/c/1.html": _image_page(heading, ["/img/1a.png", "/img/1b.webp"]),
        "/img/1a.png": Page(first, content_type="image/png"),
        "/img/1b.webp": Page(_as_webp(second), content_type="image/webp"),
        "/c/2.html": ordinary,
        "/img/ordinary.png": Page(first, content_type="image/png"),
        "/c/3.html": _image_page("第一章", ["/img/3.png"]),
        "/img/3.png": Page(chapter_png(_chapter(OTHER, 1)[1]), content_type="image/png"),
        "/c/4.html": _image_page("第四章", ["/img/broken.png", "/img/huge.png"]),
        "/img/broken.png": Page(first[:300], content_type="image/png"),
        "/img/huge.png": Page(_huge_png(), content_type="image/png"),
        "/logo.png": Page(first, content_type="image/png"),
        "/scan.pdf": Page(_scanned_pdf(chapter_png(_chapter(BOOK, 4)[1])), content_type="application/pdf"),
    }
    fptrack.run("init")
    path = tmp_path / "book.txt"
    path.write_text(BOOK, encoding="utf-8")
    fptrack.run("works", "add", str(path))
    with serve_site(pages) as base:
        crawl = fptrack.run(
            "crawl", base + "/", "--allow-private-host", base.key, "--depth", "1", "--max-pages", "20"
        )
        requested = list(base.requests)
    found = {(m["page_url"].removeprefix(base), m["chapter_index"]) for m in fptrack.matches()}
    assert ("/c/1.html", 2) in found, crawl.stdout
    assert ("/c/2.html", 3) in found, crawl.stdout
    assert ("/scan.pdf", 4) in found, crawl.stdout
    assert not any(url == "/c/3.html" for url, _ in found)
    # the ordinary chapter and the page chrome cost no image fetch; the image pages' images were fetched
    assert "/img/ordinary.png" not in requested and "/logo.png" not in requested
    assert {"/img/1a.png", "/img/1b.webp", "/img/3.png", "/img/broken.png", "/img/huge.png"} <= set(requested)
    notes = [line for line in crawl.stdout.splitlines() if line.startswith("  note: ")]
    on_four = [line for line in notes if f"{base}/c/4.html:" in line]
    assert len(on_four) == 1, crawl.stdout
    assert "broken.png" in on_four[0] and "huge.png" in on_four[0] and "pixel cap" in on_four[0]
    assert not any(f"{base}/c/1.html:" in line for line in notes), crawl.stdout


def _as_webp(png: bytes) -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.open(io.BytesIO(png)).save(out, format="WEBP", quality=90)
    return out.getvalue()


def _scanned_pdf(page: bytes) -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.open(io.BytesIO(page)).convert("RGB").save(out, format="PDF", resolution=150)
    return out.getvalue()
