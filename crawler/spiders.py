"""The one spider: request pages breadth first within the start sites, parse each with pure functions."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

import scrapy
from scrapy.exceptions import CloseSpider
from scrapy.http import Request, Response
from scrapy.spidermiddlewares.httperror import HttpError
from twisted.python.failure import Failure

from crawler.links import links_to_follow, site_of
from crawler.pages import CrawledPage, CrawlFailure
from crawler.parse import ParsedResponse, describe_failure, parse_response
from crawler.render import RENDER_META, RenderPlan, rendered_response

__all__ = ["PageSpider"]

REQUESTED_URL = "fptrack_url"  # request meta key: the URL as first requested (kept through redirects)
START_PAGE = "fptrack_start"  # request meta key: True on start requests (kept through redirects)
PAGE_DEPTH = "fptrack_depth"  # request meta key: link depth of the page (Scrapy's "depth" counts a render as a hop)


class PageSpider(scrapy.Spider):
    """Fetch ``start_urls`` (depth 0) and the same-site links of every HTML page down to ``depth``;
    emit one :class:`CrawledPage` per response, at most ``max_pages``, and a :class:`CrawlFailure` per
    request that got no response."""

    name = "fptrack-pages"
    # Error pages are pages too: they reach parse() instead of being filtered (3xx stay with the
    # redirect middleware, which ignores statuses listed here).
    handle_httpstatus_list: ClassVar[list[int]] = list(range(400, 600))

    def __init__(
        self,
        *,
        start_urls: Sequence[str],
        depth: int,
        max_pages: int,
        extra_sites: Sequence[str] = (),
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        render: RenderPlan | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.start_urls = list(start_urls)
        self.depth = depth
        self.max_pages = max_pages
        # Grows when a start URL redirects to another site (example.com -> www.example.com); see
        # crawler.middlewares.StayOnStartSites, which reads and extends this set.
        self.allowed_sites: set[str] = {site_of(url) for url in self.start_urls} | set(extra_sites)
        self.include = [re.compile(pattern) for pattern in include]
        self.exclude = [re.compile(pattern) for pattern in exclude]
        self.pages_emitted = 0
        self.render = render or RenderPlan()  # default: never render (a spider built outside run_crawl)

    async def start(self) -> AsyncIterator[Request]:
        for request in self._start_requests():
            yield request

    def start_requests(self) -> Iterator[Request]:  # Scrapy < 2.13
        yield from self._start_requests()

    def _start_requests(self) -> Iterator[Request]:
        for url in self.start_urls:
            yield self._request(url, start=True)

    def _request(self, url: str, *, start: bool = False, depth: int = 0) -> Request:
        meta = {REQUESTED_URL: url, START_PAGE: start, PAGE_DEPTH: depth}
        return Request(url, callback=self.parse, errback=self.on_error, meta=meta)

    def parse(self, response: Response, **kwargs: Any) -> Iterator[CrawledPage | Request]:
        if self.pages_emitted >= self.max_pages:
            self._inc("fptrack/responses_over_budget")
            return
        rendered = response.meta.get(RENDER_META) is not None
        parsed = parse_response(
            rendered_response(response) if rendered else response,
            requested_url=response.meta.get(REQUESTED_URL, response.url),
            fetched_at=datetime.now(UTC),
        )
        if self.render.wants(response, parsed.page):
            # built by scripts (or render_js=yes): the browser's rendering is the page; counted when it is emitted
            self._inc("fptrack/render/requested")
            meta = {key: response.meta[key] for key in (REQUESTED_URL, START_PAGE) if key in response.meta}
            meta[PAGE_DEPTH] = self._depth(response.meta)
            yield self.render.request(response, parsed, meta, callback=self.parse, errback=self.on_render_error)
            return
        if rendered:
            self._inc("fptrack/render/pages")
        yield from self._emit(parsed, response.meta)

    @staticmethod
    def _depth(meta: Mapping[str, Any]) -> int:
        return int(meta.get(PAGE_DEPTH, meta.get("depth", 0)))

    def _emit(self, parsed: ParsedResponse, meta: Mapping[str, Any]) -> Iterator[CrawledPage | Request]:
        """Hand the page on (one more against ``max_pages``) and follow its links."""
        self.pages_emitted += 1
        yield parsed.page
        if self.pages_emitted >= self.max_pages:
            raise CloseSpider("max_pages")
        depth = self._depth(meta)
        if depth >= self.depth or not parsed.links:
            return
        follow, off_site = links_to_follow(parsed.links, frozenset(self.allowed_sites))
        if off_site:
            self._inc("fptrack/links_off_site", off_site)
        for url in follow:
            if self.wanted(url):
                yield self._request(url, depth=depth + 1)
            else:
                self._inc("fptrack/links_excluded")

    def wanted(self, url: str) -> bool:
        """The site's include/exclude patterns (``re.search``) on a link."""
        if self.include and not any(pattern.search(url) for pattern in self.include):
            return False
        return not any(pattern.search(url) for pattern in self.exclude)

    def on_render_error(self, failure: Failure) -> Iterator[CrawledPage | CrawlFailure | Request]:
        """A render that failed (timeout, browser crash, refused): the static page is kept, with its links."""
        request = getattr(failure, "request", None)
        static = request.meta.get(RENDER_META) if request is not None else None
        if not isinstance(static, ParsedResponse):
            yield from self.on_error(failure)
            return
        self._inc("fptrack/render/failed")
        self.logger.warning("rendering %s failed (%s); its static text is kept", request.url, failure.value)
        if self.pages_emitted >= self.max_pages:
            self._inc("fptrack/responses_over_budget")
            return
        yield from self._emit(static, request.meta)

    def on_error(self, failure: Failure) -> Iterator[CrawledPage | CrawlFailure | Request]:
        error = failure.value
        if isinstance(error, HttpError):  # a status the list above does not cover: still a page
            yield from self.parse(error.response)
            return
        request = getattr(failure, "request", None)
        url = request.meta.get(REQUESTED_URL, request.url) if request is not None else "?"
        crawler = getattr(self, "crawler", None)  # None when the spider is built outside a crawl (tests)
        timeout = crawler.settings.getfloat("DOWNLOAD_TIMEOUT") if crawler else None
        reason = describe_failure(error, timeout=timeout) if error is not None else "unknown error"
        yield CrawlFailure(url=url, reason=reason)

    def _inc(self, key: str, count: int = 1) -> None:
        crawler = getattr(self, "crawler", None)
        if crawler is not None and crawler.stats is not None:
            crawler.stats.inc_value(key, count)
