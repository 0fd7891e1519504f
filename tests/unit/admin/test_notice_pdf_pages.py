"""A notice whose copies each fill more than a page prints without nearly blank pages (admin/static/notice.css
through services.pdf with WeasyPrint, pages read back with pypdf): a section kept whole on one page
("break-inside: avoid-page") was pushed to the next page, leaving page 1 to the header alone."""

from __future__ import annotations

import io

import pytest
from pypdf import PdfReader

from fptrack.services.pdf import PdfUnavailable, html_to_pdf

ROW = (
    "<tr><th>{n}</th><td><blockquote class='original'>{original}</blockquote></td>"
    "<td><blockquote class='passage'>{copy}</blockquote></td></tr>"
)


def _notice(chapters: int) -> str:
    sections = "".join(
        f"<section class='infringement'><h2>第{k}章 <span class='url'>http://pirate.example/{k}.html</span></h2>"
        "<table class='side-by-side'><tbody>"
        + "".join(ROW.format(n=n, original="原文段落" * 60, copy="抄袭段落" * 60) for n in range(12))
        + "</tbody></table></section>"
        for k in range(1, chapters + 1)
    )
    return (
        "<!doctype html><html lang='zh-CN'><head><meta charset='utf-8'>"
        "<link rel='stylesheet' href='notice.css'></head><body class='notice-document'>"
        f"<h1>侵权通知书</h1><p>{'说明' * 300}</p>{sections}<footer>签名</footer></body></html>"
    )


def test_a_three_chapter_notice_has_no_nearly_blank_page() -> None:
    try:
        pdf = html_to_pdf(_notice(3), engine="weasyprint")
    except PdfUnavailable as error:
        pytest.skip(str(error))
    pages = [len((page.extract_text() or "").strip()) for page in PdfReader(io.BytesIO(pdf)).pages]
    full = max(pages)
    # every page but the last carries at least half a page of text (it was 16 pages, 4 of them under half)
    assert all(chars >= full / 2 for chars in pages[:-1]), pages
