"""Conditional requests: a re-crawl asks for a page only if it changed since the crawl that stored it.

A page stored from a 200 response keeps its ``ETag`` and ``Last-Modified`` (``pages.etag``,
``pages.last_modified``). :class:`ConditionalRequests`, a downloader middleware after the private-address
guard, sends them back as ``If-None-Match`` and ``If-Modified-Since``; a ``304 Not Modified`` answer becomes a
:class:`~crawler.pages.CrawledPage` with ``not_modified`` set, and :class:`crawler.store.PageStore` keeps the
page as it is (text, fingerprints, matches, ``compared_at``), moving only its ``fetched_at``: it counts as
unchanged.

Only requests whose links the crawl will not follow are made conditional: those at the crawl's depth limit (a
304 has no body, so no links to follow: a start page or a table of contents answered 304 would hide the
chapters behind it). On a typical pirate site that is the chapter pages, the bulk of a crawl; the pages that
lead to them are fetched in full, and their new links found. Requests rendered in the browser
(crawler/render.py) are never conditional.

A site crawl does not request most known chapter pages at all (crawler/known.py); the conditional requests
are for those it still fetches (a chapter whose copy is due for a re-check, a page that failed before)."""

from __future__ import annotations

from typing import Any

from scrapy.crawler import Crawler
from scrapy.http import Request

from fptrack.crawler.pipelines import HOOKS_SETTING, CrawlHooks

__all__ = ["CONDITIONAL", "ConditionalRequests"]

CONDITIONAL = "fptrack_conditional"  # request meta key: validators were sent with this request


class ConditionalRequests:
    """Downloader middleware: add ``If-None-Match`` / ``If-Modified-Since`` from the stored page (see the
    module docstring). The stored validators are read in a thread, never on the reactor's."""

    def __init__(self, crawler: Crawler, store: Any) -> None:
        self.crawler = crawler
        self.store = store

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ConditionalRequests:
        hooks = crawler.settings.get(HOOKS_SETTING)
        return cls(crawler, hooks.store if isinstance(hooks, CrawlHooks) else None)

    async def process_request(self, request: Request, spider: object = None) -> None:
        if (
            self.store is None
            or request.meta.get("dont_obey_robotstxt")
            or request.url.endswith("/robots.txt")
            or request.meta.get("playwright")  # a browser navigation: a 304 leaves it nothing to render
        ):
            return
        limit = getattr(self.crawler.spider, "depth", None)
        if limit is None or request.meta.get("depth", 0) < limit:
            return
        from scrapy.utils.defer import maybe_deferred_to_future
        from twisted.internet.threads import deferToThread

        from fptrack.crawler.spiders import REQUESTED_URL

        url = request.meta.get(REQUESTED_URL, request.url)
        etag, last_modified = await maybe_deferred_to_future(deferToThread(self.store.validators, url))
        if not etag and not last_modified:
            return
        if etag:
            request.headers.setdefault(b"If-None-Match", etag.encode("latin-1", errors="ignore"))
        if last_modified:
            request.headers.setdefault(b"If-Modified-Since", last_modified.encode("latin-1", errors="ignore"))
        request.meta[CONDITIONAL] = True
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value("fptrack/conditional_requests")
