"""Listing pages (crawler/parse.py ``is_listing``): entry pages, tables of contents, feeds and sitemaps are
listings, which re-crawls fetch again; chapter pages are not, whatever links surround their text."""

from __future__ import annotations

import html
import time
from datetime import UTC, datetime

import pytest
from scrapy.http import HtmlResponse, Response, XmlResponse

from fptrack.crawler.parse import is_listing, parse_response
from fptrack.storage.match_life import UNSETTLED_NOTE
from testbed.sites import TEMPLATES, Page, Redirect, chapter_page
from tests.support.pirate_site import LIGHT, paragraphs_of, pirate_site

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def _parsed(path: str, page: Page, *, response_class: type[Response] = HtmlResponse) -> bool:
    url = f"http://novel.test{path}"
    headers = {"Content-Type": page.content_type} if page.content_type else {}
    response = response_class(url, body=page.body, headers=headers, status=page.status)
    return parse_response(response, requested_url=url, fetched_at=NOW).page.listing


def _toc(count: int, *, intro: str = "") -> Page:
    chapters = "".join(
        f"<li><a href='/book/1/{n}.html'>第{n}章 {html.escape('风起')}</a></li>" for n in range(1, count + 1)
    )
    return Page.html(
        "<html><head><title>某书最新章节目录</title></head><body><div class='nav'><a href='/'>首页</a>"
        f"<a href='/rank/'>排行</a></div><h1>某书</h1><p>{html.escape(intro)}</p><ul class='chapters'>"
        f"{chapters}</ul></body></html>"
    )


def test_the_pirate_sites_home_is_a_listing_and_its_chapters_are_not() -> None:
    pages, expected = pirate_site()
    assert _parsed("/", pages["/"])  # type: ignore[arg-type]
    for path in expected:
        page = pages[path]
        if isinstance(page, Redirect):
            page = pages[page.location]
        assert isinstance(page, Page)
        assert not _parsed(path, page), path
    news = pages["/news.html"]
    assert isinstance(news, Page) and not _parsed("/news.html", news)


@pytest.mark.parametrize("template", TEMPLATES)
def test_chapter_pages_with_chapter_bars_and_sidebars_are_not_listings(template: str) -> None:
    # every template has links around the text: a site nav, prev / 目录 / next, related books, a footer
    page = chapter_page("第一章", paragraphs_of(LIGHT[0]), template=template)
    assert not _parsed("/book/1/1.html", page)


def test_tables_of_contents_are_listings_short_or_long() -> None:
    assert _parsed("/book/1/", _toc(3))
    assert _parsed("/book/1/", _toc(400))
    # an introduction of the book above its chapters: still mostly links
    assert _parsed("/book/1/", _toc(40, intro="一个守灯塔的老人和一封从海上寄来的信。" * 8))


def test_a_page_with_hardly_any_links_is_no_listing() -> None:
    page = Page.html("<html><body><p>短短一句。</p><a href='/'>首页</a></body></html>")
    assert not _parsed("/note.html", page)


def test_feeds_and_sitemaps_are_listings() -> None:
    sitemap = Page(
        b'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<url><loc>http://novel.test/book/1/1.html</loc></url></urlset>",
        content_type="application/xml",
    )
    feed = Page(
        b'<?xml version="1.0"?><rss version="2.0"><channel><title>t</title><item><link>'
        b"http://novel.test/book/1/1.html</link></item></channel></rss>",
        content_type="text/xml",
    )
    assert _parsed("/sitemap.xml", sitemap, response_class=XmlResponse)
    assert _parsed("/feed.xml", feed, response_class=XmlResponse)


def test_feeds_and_sitemaps_give_their_pages_as_links() -> None:
    sitemap = (
        b'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<url><loc> http://novel.test/book/1/1.html </loc></url><url><loc>/book/1/2.html?a=1&amp;b=2</loc>"
        b"</url><url><loc>http://novel.test/book/1/1.html#top</loc></url><url><loc>ftp://x/y</loc></url></urlset>"
    )
    atom = (
        b'<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><entry>'
        b'<link rel="alternate" href="http://novel.test/book/1/3.html"/></entry></feed>'
    )
    url = "http://novel.test/sitemap.xml"
    parsed = parse_response(
        XmlResponse(url, body=sitemap, headers={"Content-Type": "application/xml"}),
        requested_url=url,
        fetched_at=NOW,
    )
    assert parsed.links == ("http://novel.test/book/1/1.html", "http://novel.test/book/1/2.html?a=1&b=2")
    feed_url = "http://novel.test/atom.xml"
    parsed = parse_response(
        XmlResponse(feed_url, body=atom, headers={"Content-Type": "text/xml"}),
        requested_url=feed_url,
        fetched_at=NOW,
        max_links=5,
    )
    assert parsed.links == ("http://novel.test/book/1/3.html",)


def test_a_page_the_browser_read_before_its_scripts_were_done_says_so() -> None:
    url = "http://novel.test/book/1/1.html"
    body = b"<html data-fptrack-unsettled='1'><body><div id='content'>loading</div></body></html>"
    parsed = parse_response(HtmlResponse(url, body=body), requested_url=url, fetched_at=NOW)
    assert UNSETTLED_NOTE in parsed.page.note
    plain = parse_response(
        HtmlResponse(url, body=body.replace(b" data-fptrack-unsettled='1'", b"")),
        requested_url=url,
        fetched_at=NOW,
    )
    assert UNSETTLED_NOTE not in plain.page.note


def test_error_pages_are_no_listings() -> None:
    assert not _parsed("/book/1/", Page(_toc(40).body, status=404))


def test_unclosed_anchors_cost_a_linear_scan() -> None:
    # a hostile page: tens of thousands of anchors never closed, and a text long enough to need the count
    markup = "<p>" + "正文" * 500 + "</p>" + "<a href='/x'>x" * 50_000
    started = time.monotonic()
    is_listing(markup, "正文" * 500, 50_000)
    assert time.monotonic() - started < 5.0
