"""Pages built by scripts, rendered by Debian's Chromium through scrapy-playwright (crawler/render.py), on
real crawls of loopback sites: which pages are rendered in each ``render_js`` mode, the private-address guard
on the browser's own requests, and a crawl without Chromium."""

from __future__ import annotations

import pytest

from testbed.jspages import fetching_page, json_chapter, json_endpoint, written_chapter
from testbed.sites import Page, Redirect, chapter_page, serve_site
from tests.integration.crawler.harness import OTHER_PARAGRAPHS, PARAGRAPHS, crawl_in_child
from tests.support.proxy import loopback_proxy

pytestmark = [pytest.mark.slow, pytest.mark.browser]
GUARD = "refused by the private-address guard"


def _site() -> dict[str, Page | Redirect]:
    links = "".join(f"<a href='{p}'>{p}</a> " for p in ("/1.html", "/2.html", "/3.html"))
    return {
        "/": Page.html(f"<html><body><h1>书友小说网</h1><p>{links}</p></body></html>"),
        "/1.html": json_chapter("第一章 山路", "/api/chapter/1.json"),
        "/api/chapter/1.json": json_endpoint(PARAGRAPHS),
        "/2.html": written_chapter("第二章 集市", OTHER_PARAGRAPHS),
        "/3.html": chapter_page("第三章", PARAGRAPHS),  # static text: never rendered in auto mode
    }


def test_auto_renders_the_pages_whose_text_scripts_build() -> None:
    with serve_site(_site()) as site:
        result = crawl_in_child([site + "/"], depth=1, timeout=180)
        requests = list(site.page_requests)
    assert result.page(site + "/1.html")["text"].split("\n") == PARAGRAPHS
    assert result.page(site + "/2.html")["text"].split("\n") == OTHER_PARAGRAPHS
    assert result.page(site + "/3.html")["text"].split("\n") == PARAGRAPHS
    assert len(result.pages) == 4  # one page per URL, rendered or not
    counters = result.stats["counters"]
    assert (counters["fptrack/render/requested"], counters["fptrack/render/pages"]) == (2, 2)
    # the static fetch, then the browser's; the page with text (and the index, no script) once
    assert sorted(requests) == sorted(
        ["/", "/1.html", "/1.html", "/js/common.js", "/api/chapter/1.json", "/2.html", "/2.html", "/3.html"]
    )
    assert result.stats["failures"] == [] and result.stats["notes"] == []
    assert result.browser_handler_loaded


def test_auto_on_a_site_of_static_pages_never_loads_the_browsers_handler() -> None:
    # scrapy-playwright's handler is made with the first page that needs the browser: a crawl whose pages all
    # have static text never pays for it (0.15-0.2 s of its start)
    site_pages = {path: page for path, page in _site().items() if path in ("/", "/3.html")}
    with serve_site(site_pages) as site:
        result = crawl_in_child([site + "/"], depth=1, timeout=180)
    assert result.page(site + "/3.html")["text"].split("\n") == PARAGRAPHS
    assert "fptrack/render/requested" not in result.stats["counters"]
    assert not result.browser_handler_loaded
    assert result.stats["failures"] == [] and result.stats["notes"] == []


def test_no_leaves_them_as_fetched_and_yes_renders_every_html_page() -> None:
    with serve_site(_site()) as site:
        static = crawl_in_child([site + "/"], depth=1, options={"render_js": "no"}, timeout=180)
        static_requests = list(site.page_requests)
        site.requests.clear()
        every = crawl_in_child(
            [site + "/"], depth=1, options={"render_js": "yes"}, settings={"render_pages": 1}, timeout=180
        )
    assert static.page(site + "/1.html")["text"] in ("", "正在加载……")
    assert static.page(site + "/2.html")["text"] == ""
    assert "/api/chapter/1.json" not in static_requests
    assert not any(key.startswith(("fptrack/render", "playwright/")) for key in static.stats["counters"])
    assert every.page(site + "/1.html")["text"].split("\n") == PARAGRAPHS
    counters = every.stats["counters"]
    assert counters["fptrack/render/pages"] == 4  # the index and the static chapter too
    # FPTRACK_RENDER_PAGES=1: one browser context, one page in it at a time
    assert (
        counters["playwright/context_count/max_concurrent"],
        counters["playwright/page_count/max_concurrent"],
    ) == (1, 1)


def test_the_browser_cannot_reach_a_refused_address() -> None:
    secret = {
        "/secret": Page.html("<p>内部管理页面：数据库密码与用户名单，绝不能被抓取出去。</p>"),
        "/secret.js": Page(b"document.write('<p>\\u5185\\u90e8</p>')", content_type="text/javascript"),
    }
    with serve_site(secret) as private:
        pages = {
            "/": Page.html(
                "<a href='/direct.html'>1</a> <a href='/hop.html'>2</a> <a href='/script.html'>3</a>"
            ),
            "/direct.html": fetching_page(private + "/secret"),  # fetch() of another loopback port
            "/hop.html": fetching_page("/hop"),  # a same-site URL that redirects there
            "/hop": Redirect(private + "/secret"),
            "/script.html": Page.html(
                "<html><body><div id='content'><script src='/lib.js'></script></div></body></html>"
            ),
            "/lib.js": Redirect(private + "/secret.js"),
        }
        with serve_site(pages) as site:
            result = crawl_in_child([site + "/"], depth=1, timeout=180)
    assert private.requests == []
    for path in ("/direct.html", "/hop.html", "/script.html"):
        assert result.page(site + path)["text"] in ("", "正在加载……")
    failures = dict(map(tuple, result.stats["failures"]))
    assert set(failures) == {private + "/secret", private + "/secret.js"}
    reason = failures[private + "/secret"]
    assert reason.startswith(
        f"{GUARD}: 127.0.0.1 is a loopback address (allow it with --allow-private-host {private.key}"
    )
    assert "(requested by the browser rendering " + site + "/" in reason
    assert result.stats["counters"]["fptrack/render/refused_private_address"] == 3


def test_an_allowed_redirect_of_a_script_is_followed() -> None:
    with serve_site({"/chapter.js": Page(_write_js(PARAGRAPHS), content_type="text/javascript")}) as cdn:
        pages = {
            "/": Page.html("<a href='/1.html'>1</a>"),
            "/1.html": Page.html(
                "<html><body><div id='content'><script src='/js/1.js'></script></div></body></html>"
            ),
            "/js/1.js": Redirect(cdn + "/chapter.js"),
        }
        with serve_site(pages) as site:
            result = crawl_in_child([site + "/"], depth=1, allow=[site.key, cdn.key], timeout=180)
    assert cdn.requests == ["/chapter.js"]
    assert result.page(site + "/1.html")["text"].split("\n") == PARAGRAPHS


def _write_js(paragraphs: list[str]) -> bytes:
    import json

    return "".join(f"document.write({json.dumps('<p>' + p + '</p>')});" for p in paragraphs).encode("utf-8")


def test_without_chromium_auto_keeps_static_text_and_says_why_while_yes_refuses() -> None:
    missing = {"chromium": "/nonexistent/chromium"}
    with serve_site(_site()) as site:
        auto = crawl_in_child([site + "/"], depth=1, settings=missing, timeout=120)
        refused = crawl_in_child(
            [site + "/"], depth=1, settings=missing, options={"render_js": "yes"}, timeout=120
        )
    assert auto.page(site + "/2.html")["text"] == ""
    note = (
        "JS rendering off: '/nonexistent/chromium' not found "
        "(install the Debian package chromium or set FPTRACK_CHROMIUM)"
    )
    assert auto.stats["notes"] == [note]
    assert refused.crawl_error is not None and "\n" not in refused.crawl_error
    assert refused.crawl_error.startswith(
        "render_js=yes needs Chromium, and '/nonexistent/chromium' was not found"
    )
    assert refused.pages == []


def test_the_browser_makes_no_request_of_its_own() -> None:
    """Chromium phones home (update checks to update.googleapis.com) and honours ``http_proxy``: it must not
    reach anything, here a loopback listener standing in for a proxy that would forward it. Scrapy's own
    requests to the loopback site go direct (``no_proxy``)."""
    import os

    with serve_site(_site()) as site, loopback_proxy() as proxy:
        env = {
            k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "no_proxy")
        }
        env.update(
            http_proxy=f"http://127.0.0.1:{proxy.port}",
            https_proxy=f"http://127.0.0.1:{proxy.port}",
            no_proxy="127.0.0.1",
        )
        result = crawl_in_child([site + "/"], depth=1, env=env, options={"render_js": "yes"}, timeout=180)
    assert result.page(site + "/1.html")["text"].split("\n") == PARAGRAPHS
    assert proxy.received == []


def test_a_render_that_times_out_keeps_the_static_page() -> None:
    pages = {
        "/": Page.html("<a href='/1.html'>1</a>"),
        # the load event waits for a script that takes longer than FPTRACK_RENDER_TIMEOUT
        "/1.html": Page.html(
            "<html><body><div id='content'>加载中</div><a href='/2.html'>下一章</a>"
            "<script src='/slow.js'></script></body></html>"
        ),
        "/slow.js": Page(b"", content_type="text/javascript", delay=6.0),
        "/2.html": chapter_page("第二章", PARAGRAPHS),
    }
    with serve_site(pages) as site:
        result = crawl_in_child([site + "/"], depth=2, settings={"render_timeout": 1.5}, timeout=180)
    assert result.page(site + "/1.html")["text"] in ("加载中", "")  # the static page, kept
    assert result.page(site + "/2.html")["text"].split("\n") == PARAGRAPHS  # and its links followed
    counters = result.stats["counters"]
    assert counters["fptrack/render/failed"] == 1 and "fptrack/render/pages" not in counters
    assert result.stats["failures"] == []
