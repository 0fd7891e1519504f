"""Item pipelines, one concern each, in this order: record -> persist (or sink) -> progress.

- :class:`RecordPipeline` counts pages by status and collects failures (ledger and namespaced Scrapy stats);
- :class:`PersistPipeline` writes pages through a :class:`crawler.store.PageStore` a batch at a time (and at
  least every :data:`FLUSH_SECONDS`, and when the spider closes); the store enqueues after each commit;
- :class:`SinkPipeline` hands each page to a plain callback instead (``fptrack check`` of one URL, tests);
- :class:`ProgressPipeline` tells the caller after each page.

Callbacks cannot travel through Scrapy's settings as such (the settings are deep-copied, which would copy a
bound method's object); they travel inside a :class:`CrawlHooks`, which deep-copies to itself.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scrapy.crawler import Crawler

from fptrack.crawler.pages import CrawledPage, CrawlFailure, CrawlProgress

__all__ = [
    "CrawlHooks",
    "CrawlLedger",
    "PersistPipeline",
    "ProgressPipeline",
    "RecordPipeline",
    "SinkPipeline",
]

FLUSH_SECONDS = 1.0

HOOKS_SETTING = "FPTRACK_HOOKS"
logger = logging.getLogger(__name__)


@dataclass
class CrawlLedger:
    """Running totals of one crawl, read by ``run_crawl`` when Scrapy is done."""

    pages_seen: int = 0
    pages_with_text: int = 0
    by_status: Counter[int] = field(default_factory=Counter)
    failures: list[tuple[str, str]] = field(default_factory=list)
    sink_errors: int = 0
    progress_errors: int = 0
    finish_reason: str = ""
    counters: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def record_failure(self, url: str, reason: str) -> None:
        """A failure found outside the spider (the browser's refused requests, :mod:`crawler.render`)."""
        self.failures.append((url, reason))


@dataclass
class CrawlHooks:
    """The caller's callbacks and the ledger, shared by reference with the pipelines."""

    sink: Callable[[CrawledPage], None] | None
    progress: Callable[[CrawlProgress], None] | None
    max_pages: int
    store: Any = None  # a crawler.store.PageStore, or None when ``sink`` takes the pages
    ledger: CrawlLedger = field(default_factory=CrawlLedger)

    def __deepcopy__(self, memo: dict[int, Any]) -> CrawlHooks:
        return self  # shared on purpose: the caller reads the ledger and owns the callbacks


def _hooks(crawler: Crawler) -> CrawlHooks:
    hooks = crawler.settings.get(HOOKS_SETTING)
    if not isinstance(hooks, CrawlHooks):
        raise TypeError(f"the {HOOKS_SETTING} setting must hold a CrawlHooks (run crawls with run_crawl)")
    return hooks


class RecordPipeline:
    """Count pages by status and collect failures, in the ledger and in namespaced Scrapy stats."""

    def __init__(self, ledger: CrawlLedger, stats: Any) -> None:
        self.ledger = ledger
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RecordPipeline:
        from scrapy import signals

        pipeline = cls(_hooks(crawler).ledger, crawler.stats)
        crawler.signals.connect(pipeline.spider_closed, signal=signals.spider_closed)
        return pipeline

    def spider_closed(self, spider: object = None, reason: str = "") -> None:
        # Scrapy closes the pipelines before it records its finish_reason stat: the reason ("shutdown" on
        # Ctrl+C or SIGTERM, "finished", "closespider_...") comes with the spider_closed signal, which is sent
        # after.
        self.ledger.finish_reason = str(reason or self.ledger.finish_reason)
        self.close_spider(spider)

    def close_spider(self, spider: object = None) -> None:
        stats = self.stats.get_stats() if self.stats is not None else {}
        self.ledger.counters = {
            str(key): int(value)
            for key, value in stats.items()
            if str(key).startswith(("fptrack/", "robotstxt/", "playwright/")) and isinstance(value, int)
        }

    def process_item(self, item: Any, spider: object = None) -> Any:
        if isinstance(item, CrawledPage):
            self.ledger.pages_seen += 1
            self.ledger.by_status[item.status] += 1
            self.stats.inc_value("fptrack/pages_seen")
            self.stats.inc_value(f"fptrack/status/{item.status}")
            if item.text:
                self.ledger.pages_with_text += 1
                self.stats.inc_value("fptrack/pages_with_text")
            if item.error:
                self.stats.inc_value("fptrack/pages_without_text")
        elif isinstance(item, CrawlFailure):
            self.ledger.failures.append((item.url, item.reason))
            self.stats.inc_value("fptrack/failures")
        return item


class PersistPipeline:
    """Write each page through the crawl's :class:`~crawler.store.PageStore` (batched; flushed on a timer and
    when the spider closes). A failing write is logged and counted, and the crawl stops: pages it cannot store
    are pages it would lose."""

    def __init__(self, hooks: CrawlHooks, stats: Any) -> None:
        self.hooks = hooks
        self.stats = stats
        self._timer: Any = None
        self.crawler: Crawler | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PersistPipeline:
        pipeline = cls(_hooks(crawler), crawler.stats)
        pipeline.crawler = crawler
        return pipeline

    def open_spider(self, spider: object = None) -> None:
        if self.hooks.store is None:
            return
        from twisted.internet import task

        self._timer = task.LoopingCall(self._flush)
        self._timer.start(FLUSH_SECONDS, now=False)

    def close_spider(self, spider: object = None) -> None:
        if self._timer is not None and self._timer.running:
            self._timer.stop()
        self._flush()

    def _flush(self) -> None:
        if self.hooks.store is None:
            return
        try:
            self.hooks.store.flush()
        except Exception as error:
            self.hooks.ledger.sink_errors += 1
            self.stats.inc_value("fptrack/store_errors")
            logger.exception("storing a batch of pages failed")
            self.hooks.ledger.failures.append(("(store)", f"cannot store pages: {error}"))
            engine = getattr(getattr(self, "crawler", None), "engine", None)
            if engine is not None and getattr(engine, "spider", None) is not None:
                engine.close_spider(engine.spider, "store_failed")

    def process_item(self, item: Any, spider: object = None) -> Any:
        if isinstance(item, CrawledPage) and self.hooks.store is not None:
            if self.hooks.store.add(item):
                self._flush()
            self.stats.inc_value("fptrack/pages_persisted")
        return item


class SinkPipeline:
    """Hand each page to the caller's sink. A sink that raises is logged and counted; the crawl goes on."""

    def __init__(self, hooks: CrawlHooks, stats: Any) -> None:
        self.hooks = hooks
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SinkPipeline:
        return cls(_hooks(crawler), crawler.stats)

    def process_item(self, item: Any, spider: object = None) -> Any:
        if isinstance(item, CrawledPage) and self.hooks.sink is not None:
            try:
                self.hooks.sink(item)
            except Exception:
                self.hooks.ledger.sink_errors += 1
                self.stats.inc_value("fptrack/sink_errors")
                logger.exception("the page sink failed on %s; the crawl continues", item.url)
        return item


class ProgressPipeline:
    """Tell the caller's progress callback after each page."""

    def __init__(self, hooks: CrawlHooks) -> None:
        self.hooks = hooks

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ProgressPipeline:
        return cls(_hooks(crawler))

    def process_item(self, item: Any, spider: object = None) -> Any:
        if isinstance(item, CrawledPage) and self.hooks.progress is not None:
            report = CrawlProgress(
                pages_seen=self.hooks.ledger.pages_seen,
                max_pages=self.hooks.max_pages,
                last_url=item.url,
                last_status=item.status,
            )
            try:
                self.hooks.progress(report)
            except Exception:
                self.hooks.ledger.progress_errors += 1
                logger.exception("the progress callback failed; the crawl continues")
        return item
