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
are for those it still fetches (a chapter whose copy is due for a re-check, a page that failed before).

The validators of a site's stored pages are read in one query, in a thread, when the crawl first asks for one
of its pages at the depth limit (:meth:`crawler.store.PageStore.site_validators`), and looked up in memory
after that: a new site costs one empty query, not one per chapter page. A site holding more than
:data:`SITE_VALIDATORS_MAX` pages with validators is asked page by page instead; a site whose read fails
too."""

from __future__ import annotations

import logging
from typing import Any

from scrapy.crawler import Crawler
from scrapy.http import Request
from twisted.internet.defer import Deferred, DeferredLock
from twisted.python.failure import Failure

from fptrack.crawler.links import site_of
from fptrack.crawler.pipelines import HOOKS_SETTING, CrawlHooks

__all__ = ["CONDITIONAL", "SITE_VALIDATORS_MAX", "ConditionalRequests"]

logger = logging.getLogger(__name__)

CONDITIONAL = "fptrack_conditional"  # request meta key: validators were sent with this request
SITE_VALIDATORS_MAX = 200_000  # a site's validators held in memory (~40 MB of URLs); past it, read per page
_PER_PAGE = None  # a site's entry when its validators are read page by page


class ConditionalRequests:
    """Downloader middleware: add ``If-None-Match`` / ``If-Modified-Since`` from the stored page (see the
    module docstring). The stored validators are read in a thread, never on the reactor's."""

    def __init__(self, crawler: Crawler, store: Any) -> None:
        self.crawler = crawler
        self.store = store
        # site key -> its pages' validators by URL (or _PER_PAGE), once read
        self._sites: dict[str, dict[str, tuple[str, str]] | None] = {}
        # one read at a time: the requests arriving while a site's validators are read wait for that read
        self._reading = DeferredLock()

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
        from fptrack.crawler.spiders import REQUESTED_URL

        url = request.meta.get(REQUESTED_URL, request.url)
        etag, last_modified = await self._validators(url)
        if not etag and not last_modified:
            return
        if etag:
            request.headers.setdefault(b"If-None-Match", etag.encode("latin-1", errors="ignore"))
        if last_modified:
            request.headers.setdefault(b"If-Modified-Since", last_modified.encode("latin-1", errors="ignore"))
        request.meta[CONDITIONAL] = True
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value("fptrack/conditional_requests")

    async def _validators(self, url: str) -> tuple[str, str]:
        """``(etag, last_modified)`` stored for ``url``: from its site's validators, read once, or from the
        page itself."""
        from scrapy.utils.defer import maybe_deferred_to_future
        from twisted.internet.threads import deferToThread

        site = site_of(url)
        if site not in self._sites:
            await maybe_deferred_to_future(self._reading.run(self._read_site, site))
        known = self._sites[site]
        if known is not _PER_PAGE:
            return known.get(url, ("", ""))
        result: tuple[str, str] = await maybe_deferred_to_future(deferToThread(self.store.validators, url))
        return result

    def _read_site(self, site: str) -> Deferred[None] | None:
        """Read ``site``'s validators in a thread into :attr:`_sites`, unless a request before read them."""
        from twisted.internet.threads import deferToThread

        if site in self._sites:
            return None

        def keep(known: dict[str, tuple[str, str]] | None) -> None:
            self._sites[site] = known

        def per_page(failure: Failure) -> None:  # page by page, as before
            logger.warning("cannot read the validators of %s (%s); asking per page", site, failure.value)
            self._sites[site] = _PER_PAGE

        read = deferToThread(self.store.site_validators, site, SITE_VALIDATORS_MAX)
        return read.addCallbacks(keep, per_page)
