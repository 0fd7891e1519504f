"""One reading of robots.txt for the crawl and for re-checks and discovery probes (crawler.robots): on
wildcards, ``$`` anchors, ``Allow`` overriding a shorter ``Disallow``, user-agent groups and ``Crawl-delay``,
the crawl's decision (Scrapy's robots.txt middleware with the crawl's settings) and the plain client's (a real
fetch from a loopback site) are the same, and a URL the crawl refuses is never requested by a re-check."""

from __future__ import annotations

import urllib.robotparser

from scrapy import Request, Spider
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.exceptions import IgnoreRequest
from scrapy.robotstxt import ProtegoRobotParser
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.test import get_crawler

from fptrack.core.settings import Settings
from fptrack.crawler.guard import PrivateAddressPolicy
from fptrack.crawler.guarded_http import FetchFailure, GuardedFetcher
from fptrack.crawler.robots import RobotsRules
from fptrack.crawler.runner import STATIC_SCRAPY_SETTINGS
from tests.support.live_site import serve_live_site

ROBOTS = """User-agent: *
Disallow: /private/
Crawl-delay: 3

User-agent: fptrack
Disallow: /*.php$
Disallow: /chapter/*/print
Disallow: /private/
Allow: /private/open
Allow: /search$
Disallow: /search
Crawl-delay: 2

User-agent: otherbot
Disallow: /
"""

# path -> allowed for fptrack (its own group: the ``*`` group does not apply to it)
DECISIONS = {
    "/index.php": False,  # wildcard and end anchor
    "/index.php?page=2": True,  # the anchor: the query is part of what must end in .php
    "/a/b.php5": True,
    "/chapter/12/print": False,  # wildcard inside the path
    "/chapter/12/print/2": False,
    "/chapter/12/read": True,
    "/private/secret": False,
    "/private/open": True,  # the longer Allow overrides the Disallow written before it
    "/private/opened": True,
    "/search": True,  # Allow /search$ is longer than Disallow /search
    "/search?q=1": False,
    "/search/more": False,
    "/book/1.html": True,
}


def _crawl_allows(url: str, robots: str) -> bool:
    """The crawl's decision: Scrapy's robots.txt middleware with the crawl's parser and user agent."""
    crawler = get_crawler(Spider, {**STATIC_SCRAPY_SETTINGS, "ROBOTSTXT_OBEY": True})
    middleware = RobotsTxtMiddleware(crawler)
    parser = build_from_crawler(load_object(crawler.settings["ROBOTSTXT_PARSER"]), crawler, robots.encode())
    try:
        middleware.process_request_2(parser, Request(url))
    except IgnoreRequest:
        return False
    return True


def test_the_crawl_reads_robots_through_the_one_module_as_scrapy_s_protego_would() -> None:
    stock = ProtegoRobotParser(ROBOTS.encode(), None)
    for path, allowed in DECISIONS.items():
        url = "http://site.test" + path
        assert _crawl_allows(url, ROBOTS) is allowed, path
        assert stock.allowed(url, "fptrack") is allowed, path
        assert RobotsRules(ROBOTS.encode()).allows(url) is allowed, path


def test_user_agent_groups_and_crawl_delay() -> None:
    rules = RobotsRules(ROBOTS.encode())
    assert rules.crawl_delay() == 2.0
    assert rules.crawl_delay("somebot") == 3.0  # the * group
    assert rules.crawl_delay("otherbot") is None
    assert not rules.allows("http://site.test/book/1.html", "otherbot")
    assert rules.allows("http://site.test/index.php", "somebot")
    assert not rules.allows("http://site.test/private/open", "somebot")
    # a file without a group of ours falls back to *; no file allows everything; a BOM is not a rule
    star = RobotsRules(b"\xef\xbb\xbfUser-agent: *\nDisallow: /*/print$\n")
    assert not star.allows("http://site.test/chapter/1/print")
    assert star.allows("http://site.test/chapter/1/print/")
    assert RobotsRules.allow_all().allows("http://site.test/anything.php")


def test_the_standard_library_parser_disagrees_on_these_rules() -> None:
    """Why one parser: ``urllib.robotparser`` knows no wildcards or anchors and takes the first matching rule,
    so it allows what the crawl refuses and refuses what it allows."""
    parser = urllib.robotparser.RobotFileParser()
    parser.parse(ROBOTS.splitlines())
    differ = {
        path
        for path in DECISIONS
        if parser.can_fetch("fptrack", "http://site.test" + path) != DECISIONS[path]
    }
    assert {"/index.php", "/chapter/12/print", "/private/open", "/search"} <= differ


class _Clock:
    """A clock that only moves when slept on."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 3))
        self.now += seconds


def test_a_recheck_decides_as_the_crawl_and_never_requests_a_refused_url() -> None:
    pages = {path: f"<p>{path}</p>" for path, allowed in DECISIONS.items() if allowed}
    with serve_live_site(pages, robots=ROBOTS) as site:
        time = _Clock()
        fetcher = GuardedFetcher(
            Settings(),
            PrivateAddressPolicy.from_entries([site.key]),
            lambda _key: (0.5, True),
            sleep=time.sleep,
            clock=time.clock,
        )
        decided = {}
        for path in DECISIONS:
            try:
                decided[path] = fetcher.fetch(site.url(path)).status == 200
            except FetchFailure as failure:
                assert "forbidden by robots.txt" in str(failure)
                decided[path] = False
        assert decided == DECISIONS
        assert decided == {path: _crawl_allows(site.url(path), ROBOTS) for path in DECISIONS}
        requested = [path for path, _ in site.requests]
        assert requested[0] == "/robots.txt"
        assert sorted(requested[1:]) == sorted(path for path, allowed in DECISIONS.items() if allowed)
        # the fptrack group's Crawl-delay (2 s) lengthens the site's own delay (0.5 s) between the pages
        allowed = sum(DECISIONS.values())
        assert time.slept[-(allowed - 1) :] == [2.0] * (allowed - 1)


def test_a_site_without_robots_txt_allows_everything() -> None:
    with serve_live_site({"/index.php": "<p>x</p>"}) as site:  # no robots.txt: the site answers 404
        fetcher = GuardedFetcher(
            Settings(), PrivateAddressPolicy.from_entries([site.key]), lambda _key: (0, True)
        )
        assert fetcher.fetch(site.url("/index.php")).status == 200
        assert [path for path, _ in site.requests] == ["/robots.txt", "/index.php"]
