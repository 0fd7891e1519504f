"""crawler.images: which pages need OCR and which images hold their chapter, from the HTML alone."""

from __future__ import annotations

from fptrack.crawler.images import OcrPlan, chapter_image_urls, image_problem, needs_ocr

BASE = "http://example.test/book/1/2.html"


def test_an_ordinary_chapter_needs_no_ocr_and_a_short_page_may() -> None:
    assert not needs_ocr("字" * 300, min_chars=200)
    assert needs_ocr("第二章 山路", min_chars=200)
    assert not needs_ocr("", min_chars=0)  # 0: never
    assert not OcrPlan(max_images=0).active and OcrPlan().active


def test_the_content_images_are_the_chapter_and_the_chrome_is_not() -> None:
    markup = """<html><body>
      <div class="header"><img src="/static/logo.png"></div>
      <img src="/ad/banner.jpg" width="728" height="90">
      <div id="chaptercontent">
        <img data-original="/img/2_1.png" src="/static/loading.gif">
        <img src="/img/2_2.webp">
        <img src="/img/2_2.webp">
        <img src="/img/icon.png" width="16" height="16">
        <img src="data:image/png;base64,AAAA">
        <img src="/img/anim.gif">
      </div>
      <div class="share"><img src="/img/qr.png"></div>
      <img src="https://cdn.example.test/p/9.jpg" width="800" height="2400">
      <img src="/img/lost.png">
    </body></html>"""
    assert chapter_image_urls(markup, BASE, max_images=10) == (
        "http://example.test/img/2_1.png",
        "http://example.test/img/2_2.webp",
        "https://cdn.example.test/p/9.jpg",
    )
    assert chapter_image_urls(markup, BASE, max_images=1) == ("http://example.test/img/2_1.png",)
    assert chapter_image_urls("<p>no images</p>", BASE, max_images=10) == ()
    assert chapter_image_urls("<img src='/x.png'", BASE, max_images=10) == ()  # outside any content element


def test_image_problem_is_the_note_of_a_page_whose_images_were_not_all_read() -> None:
    assert image_problem("images: 1 of 2 image(s) read by OCR; image /x.png: HTTP 404") != ""
    assert image_problem("images: 2 of 2 image(s) read by OCR") == ""
    assert image_problem("download: zip; x") == ""


def test_the_ocr_settings_reach_the_plan_and_bad_languages_are_one_line() -> None:
    import pytest

    from fptrack.core.settings import ConfigurationError, Settings
    from fptrack.crawler.runner import download_limits, ocr_plan

    settings = Settings.from_env({"FPTRACK_OCR_LANGUAGES": "chi_sim+chi_tra", "FPTRACK_OCR_MAX_SECONDS": "5"})
    plan = ocr_plan(settings)
    assert plan.active and plan.limits.languages == "chi_sim+chi_tra" and plan.limits.max_seconds == 5
    assert plan.limits.max_chars == 400
    assert ocr_plan(Settings.from_env({"FPTRACK_OCR_MAX_CHARS": "0"})).limits.max_chars == 0
    assert download_limits(settings).ocr == plan.limits  # scanned PDFs
    off = Settings.from_env({"FPTRACK_OCR_MAX_IMAGES": "0"})
    assert not ocr_plan(off).active and download_limits(off).ocr is None
    with pytest.raises(ConfigurationError, match=r"^FPTRACK_OCR_LANGUAGES='chi_sim; rm' is not Tesseract"):
        Settings.from_env({"FPTRACK_OCR_LANGUAGES": "chi_sim; rm"})


def _collect(spider: object, response: object) -> list[object]:
    import asyncio

    async def run() -> list[object]:
        return [item async for item in spider.parse(response)]  # type: ignore[attr-defined]

    return asyncio.run(run())


def test_without_tesseract_an_image_page_is_kept_as_it_is_and_says_it_tells_nothing() -> None:
    from scrapy.http import HtmlResponse, Request

    from fptrack.crawler.pages import CrawledPage
    from fptrack.crawler.spiders import PageSpider
    from fptrack.fingerprint.ocr import OcrLimits
    from fptrack.storage.match_life import IMAGES_UNREAD_NOTE

    body = "<html><body><h1>第一章</h1><div id='content'><img src='/i/1.png'></div></body></html>"
    response = HtmlResponse(BASE, body=body.encode(), encoding="utf-8", request=Request(BASE))
    missing = OcrPlan(limits=OcrLimits(binary="tesseract-not-installed-here"))
    spider = PageSpider(start_urls=[BASE], depth=0, max_pages=5, ocr=missing)
    items = _collect(spider, response)
    assert len(items) == 1 and isinstance(items[0], CrawledPage)
    assert IMAGES_UNREAD_NOTE in items[0].note and len(items[0].text) < 200  # its text as parsed
    # an ordinary page is untouched
    ordinary = HtmlResponse(
        BASE, body=("<p>" + "字" * 400 + "</p>").encode(), encoding="utf-8", request=Request(BASE)
    )
    page = _collect(PageSpider(start_urls=[BASE], depth=0, max_pages=5, ocr=missing), ordinary)[0]
    assert isinstance(page, CrawledPage) and page.note == ""
