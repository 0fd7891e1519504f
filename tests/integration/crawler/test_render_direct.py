"""A site built by scripts is fetched once per page (crawler/render.py, crawler/spiders.py): once two of its
pages needed the browser, the crawl requests its next pages through the browser at once instead of fetching
each plainly first; a site whose pages have static text is never sent to the browser."""

from __future__ import annotations

import html
import json
import os
from collections import Counter

import pytest

from testbed.jspages import json_chapter, json_endpoint
from testbed.sites import Page, chapter_page, serve_site
from tests.integration.crawler.harness import PARAGRAPHS, crawl_in_child

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


def test_the_browsers_own_requests_keep_the_sites_pace() -> None:
    """The chapter's paragraphs arrive from a JSON endpoint the page's script fetches: that request, and the
    script file, take turns of the site's pace like the pages do (2 a second here), not in a burst."""
    pages: dict[str, Page] = {"/": Page.html("<html><body><a href='/1.html'>1</a> <a href='/2.html'>2</a>")}
    for number in (1, 2):
        pages[f"/{number}.html"] = json_chapter(f"第{number}章", f"/api/{number}.json")
        pages[f"/api/{number}.json"] = json_endpoint(PARAGRAPHS)
    pages["/js/common.js"] = Page(b"var common = 1;", content_type="application/javascript")
    with serve_site(pages) as site:
        result = crawl_in_child(
            [site + "/"],
            depth=1,
            timeout=240,
            env={**os.environ, "FPTRACK_SITE_RATE": "2"},
            options={"render_js": "yes"},
        )
        times, paths = list(site.request_times), list(site.requests)
    assert result.page(site + "/1.html")["text"].split("\n") == PARAGRAPHS
    assert {"/api/1.json", "/api/2.json"} <= set(paths), paths
    # every request the browser made for the pages (the script, the JSON) took a turn...
    browser_made = sum(path.startswith(("/js/", "/api/")) for path in paths)
    assert result.stats["counters"]["fptrack/render/paced_requests"] == browser_made >= 2
    # ...so they come spread out: a turn every 0.5 s (a request may reach the server a little after its turn,
    # the browser's own fetch being slower than Scrapy's, beside the next one on time), never the burst of a
    # page, its script and its JSON within a few milliseconds
    three_apart = zip(times, times[2:], strict=False)
    bunched = [later - earlier for earlier, later in three_apart if later - earlier < 0.2]
    assert not bunched, list(zip(paths, [round(t - times[0], 2) for t in times], strict=True))


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
