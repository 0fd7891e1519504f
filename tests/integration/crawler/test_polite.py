"""Polite by default: robots.txt obeyed (a site may switch it off), an honest user agent, Scrapy settings
passed through; real crawls of loopback sites, each in its own process."""

from __future__ import annotations

import pytest

from testbed.sites import Page, chapter_page, serve_site
from tests.integration.crawler.harness import PARAGRAPHS, crawl_in_child

pytestmark = pytest.mark.slow

ROBOTS = Page(
    b"User-agent: *\nDisallow: /private/\n\nUser-agent: fptrack\nDisallow: /no-fptrack/\n",
    content_type="text/plain",
)
PAGES = {
    "/robots.txt": ROBOTS,
    "/": Page.html(
        "<a href='/open.html'>open</a><a href='/private/secret.html'>private</a>"
        "<a href='/no-fptrack/x.html'>not for fptrack</a>"
    ),
    "/open.html": chapter_page("第一章", PARAGRAPHS),
    "/private/secret.html": chapter_page("第二章", PARAGRAPHS),
    "/no-fptrack/x.html": chapter_page("第三章", PARAGRAPHS),
}


def test_robots_txt_is_obeyed_by_default_with_the_rules_for_fptrack() -> None:
    with serve_site(PAGES) as site:
        result = crawl_in_child([site + "/"], depth=1)
    assert site.requests[0] == "/robots.txt"
    # the rules for "User-agent: fptrack" apply, and replace the * group (RFC 9309)
    assert sorted(site.page_requests) == ["/", "/open.html", "/private/secret.html"]
    failures = dict(map(tuple, result.stats["failures"]))
    assert failures == {site + "/no-fptrack/x.html": "Forbidden by robots.txt"}
    assert result.stats["counters"]["fptrack/failures"] == 1
    # an honest user agent: it names fptrack
    assert all(agent.startswith("fptrack/") for agent in site.user_agents)


def test_a_site_setting_turns_robots_off() -> None:
    with serve_site(PAGES) as site:
        result = crawl_in_child([site + "/"], depth=1, options={"obey_robots": False})
    assert "/robots.txt" not in site.requests
    assert sorted(site.page_requests) == ["/", "/no-fptrack/x.html", "/open.html", "/private/secret.html"]
    assert result.stats["failures"] == []


def test_scrapy_settings_pass_through_and_protected_ones_are_refused() -> None:
    with serve_site(PAGES) as site:
        result = crawl_in_child(
            [site + "/"],
            depth=1,
            options={"scrapy_settings": [["ROBOTSTXT_OBEY", "False"], ["USER_AGENT", "x/1"]]},
        )
        refused = crawl_in_child(
            [site + "/"], depth=0, options={"scrapy_settings": [["ITEM_PIPELINES", "{}"]]}
        )
    assert "/private/secret.html" in site.page_requests
    assert set(site.user_agents[: result.stats["pages_seen"]]) == {"x/1"}
    assert refused.crawl_error == "-s ITEM_PIPELINES: fptrack's own setting, it cannot be overridden"


def test_include_and_exclude_patterns_and_extra_allowed_hosts() -> None:
    other_pages = {
        "/book/1.html": chapter_page("第一章", PARAGRAPHS),
        "/ads/1.html": Page.html("<p>广告</p>"),
    }
    with serve_site(other_pages) as mirror:
        pages = {
            "/": Page.html(
                "<a href='/book/2.html'>2</a><a href='/forum/1.html'>forum</a><a "
                "href='/book/3.html?print=1'>3</a>"
                f"<a href='{mirror}/book/1.html'>mirror</a><a href='{mirror}/ads/1.html'>ad</a>"
            ),
            "/book/2.html": chapter_page("第二章", PARAGRAPHS),
        }
        with serve_site(pages) as site:
            result = crawl_in_child(
                [site + "/"],
                depth=1,
                allow=[site.key, mirror.key],
                options={"include": ["/book/"], "exclude": [r"print=1"], "allowed_hosts": [mirror.key]},
            )
    assert sorted(site.page_requests) == ["/", "/book/2.html"]
    assert mirror.page_requests == ["/book/1.html"]
    assert result.stats["counters"]["fptrack/links_excluded"] == 3
