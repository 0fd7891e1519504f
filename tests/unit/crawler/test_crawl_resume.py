"""The on-disk frontier of a site crawl (crawler.resume) on a real SQLite file, and the spider crawling from
it: what a resumed crawl requests, what it skips, what its budget counts, when a state is stale."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from scrapy.exceptions import CloseSpider
from scrapy.http import Request

from fptrack.crawler.pages import CrawledPage, CrawlOptions
from fptrack.crawler.resume import CrawlState, state_dir, state_key
from fptrack.crawler.spiders import PAGE_DEPTH, PageSpider
from tests.support.spider import PAGE, callback_items, html_response

KEY = state_key(["http://a.test/"], 2, CrawlOptions())


def _killed_run(data_dir: Path) -> None:
    """What a crawl killed mid-way leaves: its job, the start page and two links recorded."""
    state = CrawlState.open(data_dir, 7, KEY)
    assert not state.resumed
    state.add_job(41)
    state.record([("http://a.test/", 0)], start=True)
    assert state.record(
        [("http://a.test/1.html", 1), ("http://a.test/", 1), ("http://a.test/2.html", 1)]
    ) == [
        "http://a.test/1.html",
        "http://a.test/2.html",
    ]
    state.close()  # the process dies here: nothing else is written


def test_a_state_left_by_a_killed_run_is_resumed_with_its_pending_requests(tmp_path: Path) -> None:
    _killed_run(tmp_path)
    state = CrawlState.open(tmp_path, 7, KEY)
    assert state.resumed and state.earlier_jobs() == [41]
    state.done = {"http://a.test/", "http://a.test/1.html"}  # what the killed run stored
    assert state.pending() == [("http://a.test/2.html", 1, False)]
    assert state.record([("http://a.test/1.html", 2), ("http://a.test/3.html", 2)]) == [
        "http://a.test/3.html"
    ]
    state.remove()
    assert not state_dir(tmp_path, 7).exists()
    assert not CrawlState.open(tmp_path, 7, KEY).resumed


def test_a_state_made_with_other_parameters_is_discarded(tmp_path: Path) -> None:
    _killed_run(tmp_path)
    deeper = state_key(["http://a.test/"], 3, CrawlOptions())
    assert deeper != KEY
    assert state_key(["http://a.test/"], 2, CrawlOptions(exclude=("/tag/",))) != KEY
    assert state_key(["http://a.test/"], 2, CrawlOptions(delay=5.0)) == KEY  # politeness: same requests
    state = CrawlState.open(tmp_path, 7, deeper)
    assert not state.resumed and state.pending() == [] and state.earlier_jobs() == []


def test_an_unreadable_state_is_discarded(tmp_path: Path) -> None:
    directory = state_dir(tmp_path, 7)
    directory.mkdir(parents=True)
    (directory / "frontier.sqlite").write_bytes(b"not a database" * 100)
    state = CrawlState.open(tmp_path, 7, KEY)
    assert not state.resumed and state.pending() == []


def test_a_state_with_no_job_is_not_resumed(tmp_path: Path) -> None:
    """Killed before its job row existed: nothing was stored, the crawl starts from its start URLs."""
    CrawlState.open(tmp_path, 7, KEY).close()
    assert not CrawlState.open(tmp_path, 7, KEY).resumed


def test_the_resumed_spider_requests_what_is_pending_and_counts_the_budget_spent(tmp_path: Path) -> None:
    _killed_run(tmp_path)
    state = CrawlState.open(tmp_path, 7, KEY)
    state.done = {"http://a.test/", "http://a.test/1.html"}
    spider = PageSpider(start_urls=["http://a.test/"], depth=2, max_pages=4, state=state)
    (request,) = list(spider.start_requests())
    assert (request.url, request.meta[PAGE_DEPTH], request.priority) == ("http://a.test/2.html", 1, -1)
    # a page links to the start page (stored before) and next.html (new): only next.html is requested
    page, *requests = callback_items(spider.parse(html_response("http://a.test/2.html", PAGE, depth=1)))
    assert isinstance(page, CrawledPage)
    assert [r.url for r in requests if isinstance(r, Request)] == ["http://a.test/next.html"]
    assert spider.pages_taken == 3  # two stored before the kill, one now
    with pytest.raises(CloseSpider):  # the fourth page spends the budget of 4
        callback_items(spider.parse(html_response("http://a.test/next.html", PAGE, depth=2)))


def test_a_resumed_spider_whose_budget_was_spent_requests_nothing(tmp_path: Path) -> None:
    _killed_run(tmp_path)
    state = CrawlState.open(tmp_path, 7, KEY)
    state.done = {"http://a.test/", "http://a.test/1.html"}
    assert (
        list(PageSpider(start_urls=["http://a.test/"], depth=2, max_pages=2, state=state).start_requests())
        == []
    )


def test_a_fresh_spider_records_its_start_urls_and_links_before_the_page_goes_on(tmp_path: Path) -> None:
    state = CrawlState.open(tmp_path, 7, KEY)
    spider = PageSpider(start_urls=["http://a.test/"], depth=2, max_pages=10, state=state)
    assert [r.url for r in spider.start_requests()] == ["http://a.test/"]
    generator = spider.parse(html_response("http://a.test/", PAGE, depth=0))

    async def first() -> object:
        return await anext(generator)

    assert isinstance(asyncio.run(first()), CrawledPage)
    # the page is handed on only once its links are on disk
    assert [url for url, _, _ in state.pending()] == ["http://a.test/", "http://a.test/next.html"]
