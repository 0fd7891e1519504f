"""Downloader-side guards: stay on the start sites (redirects included), skip bodies that are not text."""

from __future__ import annotations

from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, StopDownload
from scrapy.http import Request

from crawler.links import site_of
from crawler.parse import is_binary_media_type, media_type

__all__ = ["SkipBinaryBodies", "StayOnStartSites"]

ALLOWED_SITES_SETTING = "FPTRACK_ALLOWED_SITES"


class StayOnStartSites:
    """Refuse any request off the start sites. Links are already filtered by the spider; this catches
    redirects (``302 Location: http://elsewhere/``), which would otherwise leave the crawl's sites."""

    def __init__(self, allowed_sites: frozenset[str], stats: Any) -> None:
        self.allowed_sites = allowed_sites
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StayOnStartSites:
        return cls(frozenset(crawler.settings.getlist(ALLOWED_SITES_SETTING)), crawler.stats)

    def process_request(self, request: Request, spider: object = None) -> None:
        if site_of(request.url) not in self.allowed_sites:
            self.stats.inc_value("fptrack/requests_off_site")
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
