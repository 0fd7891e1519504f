"""Downloader-side guards: stay on the start sites (redirects included), skip bodies that are not text."""

from __future__ import annotations

from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, StopDownload
from scrapy.http import Request

from crawler.links import site_of
from crawler.parse import is_binary_media_type, media_type
from crawler.spiders import START_PAGE

__all__ = ["SkipBinaryBodies", "StayOnStartSites"]


class StayOnStartSites:
    """Refuse any request off the crawl's sites (the spider's ``allowed_sites``). Links are already
    filtered by the spider; this catches redirects (``302 Location: http://elsewhere/``). A start URL
    that redirects to another site (``example.com`` -> ``www.example.com``) makes that site a crawl site."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StayOnStartSites:
        return cls(crawler)

    def process_request(self, request: Request, spider: object = None) -> None:
        sites: set[str] = getattr(self.crawler.spider, "allowed_sites", set())
        site = site_of(request.url)
        if site in sites:
            return
        stats = self.crawler.stats
        if request.meta.get(START_PAGE) and request.meta.get("redirect_urls"):
            sites.add(site)
            if stats is not None:
                stats.inc_value("fptrack/sites_added_by_start_redirect")
            return
        if stats is not None:
            stats.inc_value("fptrack/requests_off_site")
        raise IgnoreRequest(f"off-site redirect to {request.url}")


class SkipBinaryBodies:
    """Stop downloading a body as soon as its headers say it is an image, an archive, a PDF...: the page
    is still reported (with its status and an ``error``), but megabytes of zip are not fetched."""

    def __init__(self, stats: Any) -> None:
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SkipBinaryBodies:
        extension = cls(crawler.stats)
        crawler.signals.connect(extension.headers_received, signal=signals.headers_received)
        return extension

    def headers_received(self, headers: Any, body_length: int, request: Request, spider: object) -> None:
        content_type = (headers.get(b"Content-Type") or b"").decode("latin-1")
        if is_binary_media_type(media_type(content_type)):
            self.stats.inc_value("fptrack/binary_bodies_skipped")
            raise StopDownload(fail=False)
