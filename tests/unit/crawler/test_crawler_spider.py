"""Link filtering, the spider's parse/errback on real Scrapy objects, the pipelines, run_crawl's argument
checks."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from scrapy.exceptions import CloseSpider
from scrapy.http import Request
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler
from twisted.internet import error as net
from twisted.python.failure import Failure

from fptrack.core.settings import Settings
from fptrack.crawler import CrawledPage, CrawlError, CrawlProgress, run_crawl
from fptrack.crawler.links import links_to_follow, request_url, site_of
from fptrack.crawler.pages import CrawlFailure
from fptrack.crawler.pipelines import CrawlHooks, ProgressPipeline, RecordPipeline, SinkPipeline
from fptrack.crawler.spiders import REQUESTED_URL, PageSpider
from tests.support.spider import BODY, PAGE, callback_items, html_response

# ------------------------------------------------------------------------------------------------ links


@pytest.mark.parametrize(
    ("url", "site"),
    [
        ("http://Novel.Test/a", "novel.test"),
        ("http://novel.test:80/a", "novel.test"),
        ("https://novel.test:443/a", "novel.test"),
        ("http://127.0.0.1:8001/", "127.0.0.1:8001"),
        ("https://novel.test:8443/", "novel.test:8443"),
        ("ftp://novel.test/", ""),
        ("mailto:a@novel.test", ""),
        ("http:///nohost", ""),
        ("http://[::1/", ""),
    ],
)
def test_site_of(url: str, site: str) -> None:
    assert site_of(url) == site


def test_links_to_follow_stays_on_site_strips_fragments_and_dedupes() -> None:
    links = [
        "http://a.test/1.html#top",
        "http://a.test/1.html",
        "https://a.test/2.html",
        "http://a.test:8080/3.html",
        "http://b.test/4.html",
        "http://sub.a.test/5.html",
        "javascript:x()",
        "http://a.test/6.html#c",
    ]
    follow, off_site = links_to_follow(links, frozenset({"a.test"}))
    assert follow == ["http://a.test/1.html", "https://a.test/2.html", "http://a.test/6.html"]
    assert off_site == 3


@pytest.mark.parametrize("bad", ["ftp://a.test/", "a.test/page", "", "file:///etc/passwd", "http://"])
def test_request_url_rejects_what_cannot_be_crawled(bad: str) -> None:
    with pytest.raises(CrawlError, match="http:// or https://"):
        request_url(bad)


def test_request_url_strips_fragment_and_spaces() -> None:
    assert request_url("  http://a.test/x.html#part2 ") == "http://a.test/x.html"


# ----------------------------------------------------------------------------------------------- spider


def _spider(depth: int = 2, max_pages: int = 10) -> PageSpider:
    return PageSpider(start_urls=["http://a.test/"], depth=depth, max_pages=max_pages)


def test_parse_emits_the_page_then_same_site_requests() -> None:
    output = callback_items(_spider().parse(html_response("http://a.test/1.html", PAGE, depth=0)))
    page, *requests = output
    assert isinstance(page, CrawledPage) and page.text == BODY
    assert [r.url for r in requests] == ["http://a.test/", "http://a.test/next.html"]
    assert all(r.meta[REQUESTED_URL] == r.url and r.errback is not None for r in requests)


def test_parse_follows_no_links_at_the_depth_limit() -> None:
    output = callback_items(_spider(depth=1).parse(html_response("http://a.test/1.html", PAGE, depth=1)))
    assert [type(item) for item in output] == [CrawledPage]


def test_parse_keeps_the_first_requested_url_through_redirects() -> None:
    response = html_response("http://a.test/new.html", PAGE, depth=0, requested="http://a.test/old.html")
    page = callback_items(_spider().parse(response))[0]
    assert (page.url, page.final_url) == ("http://a.test/old.html", "http://a.test/new.html")


def test_parse_stops_the_crawl_at_max_pages() -> None:
    spider = _spider(max_pages=2)
    assert len(callback_items(spider.parse(html_response("http://a.test/1.html", PAGE, depth=0)))) == 3

    async def second_then_third() -> None:
        generator = spider.parse(html_response("http://a.test/2.html", PAGE, depth=0))
        assert isinstance(await anext(generator), CrawledPage)
        with pytest.raises(CloseSpider):
            await anext(generator)
        third = spider.parse(html_response("http://a.test/3.html", PAGE, depth=0))
        assert [item async for item in third] == []  # in flight: dropped

    asyncio.run(second_then_third())


def test_errback_turns_a_network_error_into_a_failure_item() -> None:
    failure = Failure(net.ConnectionRefusedError())
    failure.request = Request("http://a.test/x", meta={REQUESTED_URL: "http://a.test/x"})  # type: ignore[attr-defined]
    assert callback_items(_spider().on_error(failure)) == [
        CrawlFailure("http://a.test/x", "connection refused")
    ]


# -------------------------------------------------------------------------------------------- pipelines


def _page(url: str, status: int = 200, text: str = BODY) -> CrawledPage:
    return CrawledPage(
        url=url,
        final_url=url,
        status=status,
        encoding="utf-8",
        title="",
        text=text,
        content_sha256="",
        snapshot_sha256="",
        fetched_at=datetime.now(UTC),
        error="" if text else f"HTTP {status}",
    )


def test_pipelines_record_sink_and_report_in_order() -> None:
    received: list[str] = []
    reports: list[CrawlProgress] = []

    def sink(page: CrawledPage) -> None:
        if page.url.endswith("bad"):
            raise RuntimeError("database is down")
        received.append(page.url)

    hooks = CrawlHooks(sink=sink, progress=reports.append, max_pages=5)
    stats = MemoryStatsCollector(get_crawler())
    pipelines = [RecordPipeline(hooks.ledger, stats), SinkPipeline(hooks, stats), ProgressPipeline(hooks)]
    items = [
        _page("http://a.test/1"),
        _page("http://a.test/bad"),
        _page("http://a.test/404", 404, ""),
        CrawlFailure("http://a.test/dead", "connection refused"),
    ]
    for item in items:
        for pipeline in pipelines:
            assert pipeline.process_item(item) is item

    assert received == ["http://a.test/1", "http://a.test/404"]
    assert hooks.ledger.sink_errors == 1 and stats.get_value("fptrack/sink_errors") == 1
    assert hooks.ledger.pages_seen == 3 and hooks.ledger.pages_with_text == 2
    assert dict(hooks.ledger.by_status) == {200: 2, 404: 1}
    assert hooks.ledger.failures == [("http://a.test/dead", "connection refused")]
    assert stats.get_value("fptrack/status/404") == 1
    assert [(r.pages_seen, r.last_status) for r in reports] == [(1, 200), (2, 200), (3, 404)]


def test_a_failing_progress_callback_does_not_stop_anything() -> None:
    def progress(_: CrawlProgress) -> None:
        raise ValueError("terminal closed")

    hooks = CrawlHooks(sink=lambda page: None, progress=progress, max_pages=1)
    item = _page("http://a.test/1")
    assert ProgressPipeline(hooks).process_item(item) is item
    assert hooks.ledger.progress_errors == 1


def test_hooks_survive_scrapy_settings_copies_by_reference() -> None:
    from scrapy.settings import Settings as ScrapySettings

    received: list[CrawledPage] = []
    hooks = CrawlHooks(sink=received.append, progress=None, max_pages=1)
    copied = ScrapySettings({"FPTRACK_HOOKS": hooks}).copy()["FPTRACK_HOOKS"]
    assert copied is hooks
    copied.sink(_page("http://a.test/1"))
    assert len(received) == 1  # a bound method of the caller's list, not of a deep copy


# ------------------------------------------------------------------------------------- run_crawl checks


@pytest.mark.parametrize(
    ("urls", "options", "message"),
    [
        ([], {}, "no start URLs"),
        (["ftp://a.test/"], {}, "cannot crawl 'ftp://a.test/'"),
        (["http://a.test/", "not a url"], {}, "cannot crawl 'not a url'"),
        (["http://a.test/"], {"depth": -1}, "depth must be an integer >= 0"),
        (["http://a.test/"], {"max_pages": 0}, "max_pages must be an integer >= 1"),
        ([b"http://a.test/"], {}, "start URLs must be strings"),
    ],
)
def test_run_crawl_rejects_bad_arguments_before_fetching(urls: list, options: dict, message: str) -> None:
    with pytest.raises(CrawlError, match=message):
        run_crawl(urls, settings=Settings(), sink=lambda page: None, **options)
