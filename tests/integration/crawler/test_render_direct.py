"""A site built by scripts is fetched once per page (crawler/render.py, crawler/spiders.py): once two of its
pages needed the browser, the crawl requests its next pages through the browser at once instead of fetching
each plainly first; a site whose pages have static text is never sent to the browser."""

from __future__ import annotations

import html
import json
from collections import Counter

import pytest

from tests.integration.crawler.harness import PARAGRAPHS, crawl_in_child
from tests.support.sites import Page, chapter_page, serve_site

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHAIN = 5  # chapters, each linking the next: the later ones are requested after the first were rendered


def _written(number: int) -> Page:
    """Chapter ``number``, its paragraphs printed by a script, with a static link to the next chapter."""
    writes = "".join(f"document.write({json.dumps('<p>' + html.escape(p) + '</p>')});" for p in PARAGRAPHS)
    following = f"<a href='/{number + 1}.html'>下一章</a>" if number < CHAIN else ""
    return Page.html(
        f"<!DOCTYPE html><html><head><title>第{number}章</title></head><body><h1>第{number}章</h1>"
        f"<div id='content'><script>{writes}</script></div><a href='/'>目录</a> {following}</body></html>"
    )


def test_a_script_built_site_goes_to_the_browser_at_once_after_two_pages() -> None:
    pages = {"/": Page.html("<html><body><a href='/1.html'>第1章</a> <a href='/x'>x</a></body></html>")}
    pages["/x"] = Page.html("<html><body>-</body></html>")
    pages.update({f"/{n}.html": _written(n) for n in range(1, CHAIN + 1)})
    with serve_site(pages) as site:
        result = crawl_in_child([site + "/"], depth=CHAIN, timeout=240)
        requests = Counter(site.page_requests)
    for number in range(1, CHAIN + 1):
        assert result.page(site + f"/{number}.html")["text"].split("\n") == PARAGRAPHS
    # the first two: fetched plainly, then rendered; the rest: once, by the browser
    assert requests["/1.html"] == requests["/2.html"] == 2, requests
    assert all(requests[f"/{n}.html"] == 1 for n in range(3, CHAIN + 1)), requests
    counters = result.stats["counters"]
    assert counters["fptrack/render/direct"] == CHAIN - 2
    assert counters["fptrack/render/pages"] == CHAIN
    assert result.stats["failures"] == []


def test_a_site_with_static_text_is_never_sent_to_the_browser() -> None:
    pages: dict[str, Page] = {
        "/": Page.html("<html><body><a href='/1.html'>1</a> <a href='/x'>x</a></body></html>")
    }
    pages["/x"] = Page.html("<html><body>-</body></html>")
    for number in range(1, 4):
        page = chapter_page(f"第{number}章", PARAGRAPHS * 3)
        body = page.body.replace(b"</body>", f"<a href='/{number + 1}.html'>next</a></body>".encode())
        pages[f"/{number}.html"] = Page(body, content_type=page.content_type)
    with serve_site(pages) as site:
        result = crawl_in_child([site + "/"], depth=4, timeout=180)
        requests = Counter(site.page_requests)
    assert all(requests[f"/{n}.html"] == 1 for n in range(1, 4)), requests
    assert not any(key.startswith("fptrack/render/") for key in result.stats["counters"])
