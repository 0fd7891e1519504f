"""``run_crawl``: one Scrapy crawl, in this process, from start URLs to a :class:`CrawlStats`.

Once per process: Scrapy runs on Twisted's reactor, which cannot be restarted after it stops. The CLI calls
``run_crawl`` once per command; tests and long-running services run each crawl in a child process.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from crawler.links import request_url
from crawler.pages import CrawledPage, CrawlError, CrawlProgress, CrawlStats
from crawler.pipelines import HOOKS_SETTING, CrawlHooks
from crawler.store import PageStore
from storage.settings import Settings

__all__ = ["run_crawl", "scrapy_settings"]

_ran_in_this_process = False
_lock = threading.Lock()


def scrapy_settings(settings: Settings, *, hooks: CrawlHooks) -> dict[str, Any]:
    """The Scrapy settings of an fptrack crawl, derived from fptrack's :class:`Settings`."""
    max_bytes = settings.crawl_max_body_bytes
    return {
        "BOT_NAME": "fptrack",
        "USER_AGENT": settings.user_agent,
        "ROBOTSTXT_OBEY": settings.crawl_obey_robots,
        "CONCURRENT_REQUESTS": settings.crawl_concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": settings.crawl_concurrency,
        "DOWNLOAD_TIMEOUT": settings.crawl_timeout,
        "DOWNLOAD_MAXSIZE": max_bytes,
        "DOWNLOAD_WARNSIZE": 0,
        "RETRY_TIMES": 1,
        "RETRY_HTTP_CODES": [502, 503, 504, 408, 429],
        "REDIRECT_MAX_TIMES": 10,
        # Breadth first, so a max_pages budget is spent on the shallowest pages.
        "DEPTH_LIMIT": 0,
        "DEPTH_PRIORITY": 1,
        "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
        "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
        "DOWNLOADER_MIDDLEWARES": {"crawler.middlewares.StayOnStartSites": 50},
        "EXTENSIONS": {"crawler.middlewares.SkipBinaryBodies": 100},
        "ITEM_PIPELINES": {
            "crawler.pipelines.RecordPipeline": 100,
            "crawler.pipelines.PersistPipeline": 200,
            "crawler.pipelines.SinkPipeline": 250,
            "crawler.pipelines.ProgressPipeline": 300,
        },
        HOOKS_SETTING: hooks,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
        "STATS_DUMP": False,
        "COOKIES_ENABLED": True,
    }


def run_crawl(
    start_urls: Sequence[str],
    *,
    settings: Settings,
    depth: int = 2,
    max_pages: int = 100,
    sink: Callable[[CrawledPage], None] | None = None,
    store: PageStore | None = None,
    progress: Callable[[CrawlProgress], None] | None = None,
) -> CrawlStats:
    """Crawl from ``start_urls`` and return when done; every response goes to ``store`` (batched writes, see
    :mod:`crawler.store`) or, synchronously, to ``sink``.

    Start pages are depth 0; links (``<a href>``) are followed to ``depth`` on the start URLs' sites
    (host and port) only, plus the site a start URL redirects to (``example.com`` -> ``www.example.com``); at most ``max_pages`` responses are handed to ``sink``. Requests that get no
    response (refused, timed out, DNS) are listed in ``CrawlStats.failures`` with a readable reason.

    Runs Scrapy on Twisted's reactor in this thread, so it works **once per process**; a second call raises
    :class:`CrawlError`. Raises :class:`CrawlError` for bad arguments before anything is fetched.
    """
    global _ran_in_this_process
    urls = list(dict.fromkeys(request_url(url) for url in _as_url_list(start_urls)))
    if not urls:
        raise CrawlError("no start URLs given")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise CrawlError(f"depth must be an integer >= 0, got {depth!r}")
    if isinstance(max_pages, bool) or not isinstance(max_pages, int) or max_pages < 1:
        raise CrawlError(f"max_pages must be an integer >= 1, got {max_pages!r}")
    with _lock:
        if _ran_in_this_process:
            raise CrawlError(
                "run_crawl runs once per process (Twisted's reactor cannot restart); start a new process"
            )
        _ran_in_this_process = True

    from scrapy.crawler import CrawlerProcess

    from crawler.spiders import PageSpider

    if (sink is None) == (store is None):
        raise CrawlError("run_crawl needs exactly one of sink= and store=")
    hooks = CrawlHooks(sink=sink, progress=progress, max_pages=max_pages, store=store)
    process = CrawlerProcess(scrapy_settings(settings, hooks=hooks))
    # Each failed request is reported once, in CrawlStats.failures; the retry middleware's own
    # "Gave up retrying" ERROR line would only repeat it on the user's terminal.
    logging.getLogger("scrapy.downloadermiddlewares.retry").setLevel(logging.CRITICAL)
    started = time.monotonic()
    process.crawl(PageSpider, start_urls=urls, depth=depth, max_pages=max_pages)
    process.start(install_signal_handlers=threading.current_thread() is threading.main_thread())
    elapsed = time.monotonic() - started

    ledger = hooks.ledger
    return CrawlStats(
        pages_seen=ledger.pages_seen,
        pages_with_text=ledger.pages_with_text,
        by_status=dict(sorted(ledger.by_status.items())),
        failures=tuple(ledger.failures),
        elapsed_seconds=elapsed,
        sink_errors=ledger.sink_errors,
        finish_reason=ledger.finish_reason,
    )


def _as_url_list(start_urls: Sequence[str]) -> list[str]:
    if isinstance(start_urls, str):
        return [start_urls]
    for url in start_urls:
        if not isinstance(url, str):
            raise CrawlError(f"start URLs must be strings, got {url!r}")
    return list(start_urls)
