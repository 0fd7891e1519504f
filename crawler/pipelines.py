"""Item pipelines, one concern each, in this order: record -> persist (or sink) -> progress.

- :class:`RecordPipeline` counts pages by status and collects failures (ledger and namespaced Scrapy stats);
- :class:`PersistPipeline` writes pages through a :class:`crawler.store.PageStore` a batch at a time (and at
  least every :data:`FLUSH_SECONDS`, and when the spider closes); the store enqueues after each commit. It
  hands each page on with the HTTP exchange it was read from (:class:`storage.exchanges.RawExchange`): the
  responses the engine received (Scrapy's ``response_received`` signal, sent before the spider sees them)
  wait, by URL, for the page read from them, and the one whose body (or, rendered in Chromium, whose DOM)
  hashes to the page's ``snapshot_sha256`` is it (:func:`raw_exchange_of`);
- :class:`SinkPipeline` hands each page to a plain callback instead (``fptrack check`` of one URL, tests);
- :class:`ProgressPipeline` tells the caller after each page.

Callbacks cannot travel through Scrapy's settings as such (the settings are deep-copied, which would copy a
bound method's object); they travel inside a :class:`CrawlHooks`, which deep-copies to itself.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any

from scrapy.crawler import Crawler
from scrapy.http import Response

from fptrack.crawler.images import image_problem
from fptrack.crawler.pages import CrawledPage, CrawlFailure, CrawlProgress
from fptrack.crawler.parse import download_problem
from fptrack.storage.exchanges import RawExchange

__all__ = [
    "CrawlHooks",
    "CrawlLedger",
    "PersistPipeline",
    "ProgressPipeline",
    "RecordPipeline",
    "SinkPipeline",
    "raw_exchange_of",
]

FLUSH_SECONDS = 1.0
RESPONSES_WAITING = 256  # URLs whose responses wait for their page (bounded: a response may yield no page)

HOOKS_SETTING = "FPTRACK_HOOKS"
MAX_DOWNLOAD_NOTES = 50  # lines of the crawl's summary for downloads not read whole (the rest are counted)
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
            problem = download_problem(item) or image_problem(item.note)
            if problem:  # a download or chapter images not read whole: one line of the crawl's summary each
                self.stats.inc_value(
                    "fptrack/downloads_with_problems"
                    if item.note.startswith("download") or item.error
                    else "fptrack/ocr/pages_with_problems"
                )
                if len(self.ledger.notes) < MAX_DOWNLOAD_NOTES:
                    self.ledger.notes.append(f"{item.url}: {problem}")
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
        # final URL -> the 200 responses received for it, oldest first, with when each arrived
        self._received: OrderedDict[str, list[tuple[Response, datetime]]] = OrderedDict()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PersistPipeline:
        from scrapy import signals

        pipeline = cls(_hooks(crawler), crawler.stats)
        pipeline.crawler = crawler
        crawler.signals.connect(pipeline.response_received, signal=signals.response_received)
        return pipeline

    def response_received(self, response: Response, request: Any = None, spider: object = None) -> None:
        """Keep a 200 response until the page read from it arrives (only when pages are stored)."""
        if self.hooks.store is None or response.status != 200:
            return
        waiting = self._received.setdefault(response.url, [])
        waiting.append((response, datetime.now(UTC)))
        self._received.move_to_end(response.url)
        while len(self._received) > RESPONSES_WAITING:
            self._received.popitem(last=False)

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
            exchange = None
            received = self._received.pop(item.final_url, [])
            if item.status == 200 and item.text:
                exchange = raw_exchange_of(item, received)
                self.stats.inc_value("fptrack/exchanges_captured" if exchange else "fptrack/exchanges_missed")
            if self.hooks.store.add(item, exchange):
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


def raw_exchange_of(page: CrawledPage, received: Sequence[tuple[Response, datetime]]) -> RawExchange | None:
    """The exchange ``page`` was read from, among the responses ``received`` for its final URL: a plain
    response whose body hashes to the page's ``snapshot_sha256``; or a browser's (scrapy-playwright's,
    ``meta["playwright"]``) whose rendered DOM does, together with the plain response of the same URL fetched
    before it, if any (the page was first read statically, then rendered). A page Chromium fetched itself
    (rendered at once) has no plain body: its exchange carries the status and headers the browser reported
    and the DOM. None when no response matches."""
    from fptrack.crawler.render import rendered_response

    def sha256(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    plain = [(r, at) for r, at in received if not r.meta.get("playwright")]
    browser = [(r, at) for r, at in received if r.meta.get("playwright")]
    for response, at in reversed(plain):
        if sha256(response.body or b"") == page.snapshot_sha256:
            return _exchange(response, at)
    for response, at in reversed(browser):
        dom = rendered_response(response).body
        if sha256(dom) != page.snapshot_sha256:
            continue
        if plain:
            static, static_at = plain[-1]
            return _exchange(static, static_at, rendered=dom)
        return RawExchange(
            url=response.url,
            request_head=b"",
            response_head=_response_head(response, None),
            body=None,
            fetched_at=at,
            rendered=dom,
        )
    return None


def _exchange(response: Response, at: datetime, *, rendered: bytes = b"") -> RawExchange:
    from fptrack.crawler.wire import WIRE_META, WireResponse, request_head_as_sent

    body = response.body or b""
    wire = response.meta.get(WIRE_META) if response.request is not None else None
    ip_address = "" if response.ip_address is None else str(response.ip_address)
    request_head = b"" if response.request is None else request_head_as_sent(response.request)
    if not isinstance(wire, WireResponse):  # not fetched through crawler.wire's parts: the head rebuilt
        return RawExchange(
            url=response.url,
            request_head=request_head,
            response_head=_response_head(response, len(body)),
            body=body,
            fetched_at=at,
            rendered=rendered,
            ip_address=ip_address,
        )
    return RawExchange(
        url=response.url,
        request_head=request_head,
        response_head=_wire_response_head(response, wire),
        body=body,
        fetched_at=at,
        rendered=rendered,
        ip_address=ip_address,
        wire_body=None if wire.payload is body else wire.payload,
    )


def _status_line(response: Response, reason: str | None) -> bytes:
    if reason is None:
        try:
            reason = HTTPStatus(response.status).phrase
        except ValueError:
            reason = ""
    protocol = str(getattr(response, "protocol", None) or "HTTP/1.1").upper()
    if not protocol.startswith("HTTP/"):
        protocol = "HTTP/1.1"
    return f"{protocol} {response.status} {reason}".rstrip().encode("latin-1")


def _wire_response_head(response: Response, wire: Any) -> bytes:
    """The status line as received and the headers as Scrapy received them, ``Content-Encoding`` as it came
    (storage.exchanges says what Twisted leaves out)."""
    lines = [_status_line(response, wire.reason)]
    for name, values in response.headers.items():
        key = bytes(name)
        if key.lower() == b"content-encoding":
            continue
        lines += [key + b": " + bytes(value) for value in values]
    lines += [b"Content-Encoding: " + bytes(value) for value in wire.content_encoding]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _response_head(response: Response, length: int | None) -> bytes:
    """The status line and headers of ``response`` rebuilt to describe its decoded body (storage.exchanges
    says which headers are renamed), for a response crawler.wire did not see."""
    lines = [_status_line(response, None)]
    for name, values in response.headers.items():
        key = bytes(name)
        lowered = key.lower()
        for value in values:
            stale_length = lowered == b"content-length" and value != str(length).encode()
            if length is not None and (lowered == b"transfer-encoding" or stale_length):
                lines.append(b"X-Fptrack-Orig-" + key + b": " + bytes(value))
            elif length is not None and lowered == b"content-length":
                continue  # the same length is written below
            else:
                lines.append(key + b": " + bytes(value))
    if length is not None:
        lines.append(b"Content-Length: " + str(length).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n"
