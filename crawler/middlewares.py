"""Downloader-side guards: stay on the start sites (redirects included), refuse redirect loops with a reason,
skip bodies that are not text, count body bytes (a chunked body over the size cap is reported as such)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, StopDownload
from scrapy.http import Request, Response

from fptrack.crawler.images import CHAPTER_IMAGE
from fptrack.crawler.leads import SHARE_WALK
from fptrack.crawler.links import site_of
from fptrack.crawler.pages import DOWNLOAD_MAXSIZE_SETTING
from fptrack.crawler.parse import is_binary_media_type, is_download, media_type
from fptrack.crawler.spiders import BYTES_RECEIVED, START_PAGE

__all__ = ["RefuseRedirectLoops", "SkipBinaryBodies", "StayOnStartSites", "same_registrable_domain"]


@lru_cache(maxsize=1)
def _public_suffixes() -> Any:
    import tldextract

    # The public suffix list shipped with tldextract: no download. Private suffixes (github.io, blogspot.com)
    # count, so two users' pages there are two domains.
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True)


def same_registrable_domain(url: str, other: str) -> bool:
    """True when both URLs' hosts are under one registrable domain (``example.com``, ``www.example.com`` and
    ``m.example.com``; ``a.example.co.uk`` and ``b.example.co.uk``). Hosts without one (IP addresses,
    ``localhost``) must be equal."""
    hosts = [(urlsplit(u).hostname or "").lower().rstrip(".") for u in (url, other)]
    if not all(hosts):
        return False
    if hosts[0] == hosts[1]:
        return True
    domains = [_public_suffixes()(host).top_domain_under_public_suffix for host in hosts]
    return bool(domains[0]) and domains[0] == domains[1]


class StayOnStartSites:
    """Refuse any request off the crawl's sites (the spider's ``allowed_sites``). Links are already filtered
    by the spider; this catches redirects (``302 Location: http://elsewhere/``). A start URL that redirects to
    another site of its registrable domain (``example.com`` -> ``www.example.com``, or another port of the
    same host) makes that site a crawl site; a start URL redirecting anywhere else is refused, with the
    reason, as any other off-site redirect."""

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
        if request.meta.get(SHARE_WALK) or site in getattr(self.crawler.spider, "share_sites", ()):
            return  # a public share walked to its file, and its host's robots.txt (crawler.leads)
        stats = self.crawler.stats
        redirected_from = request.meta.get("redirect_urls") or ()
        if request.meta.get(START_PAGE) and redirected_from:
            if same_registrable_domain(redirected_from[0], request.url):
                sites.add(site)
                if stats is not None:
                    stats.inc_value("fptrack/sites_added_by_start_redirect")
                return
            if stats is not None:
                stats.inc_value("fptrack/requests_off_site")
            raise IgnoreRequest(
                f"start page redirected to another domain, refused: {request.url} (allow its host with "
                "--allowed-host to crawl it)"
            )
        if stats is not None:
            stats.inc_value("fptrack/requests_off_site")
        raise IgnoreRequest(f"off-site redirect to {request.url}")


_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


class RefuseRedirectLoops:
    """A redirect back to a URL of its own chain is a loop: refuse it with the reason. (Without this, the
    repeated URL is dropped silently by Scrapy's duplicate filter and the page leaves no trace at all.) Sits
    after Scrapy's redirect middleware in the chain, so it sees each 3xx response first."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RefuseRedirectLoops:
        return cls()

    def process_response(self, request: Request, response: Response, spider: object = None) -> Response:
        location_header = response.headers.get(b"Location")
        if response.status not in _REDIRECT_STATUSES or not location_header:
            return response
        location = location_header.decode("latin-1").strip()
        target = urldefrag(urljoin(request.url, location)).url
        chain = [urldefrag(url).url for url in (*request.meta.get("redirect_urls", ()), request.url)]
        if target in chain:
            loop = " -> ".join([*chain[chain.index(target) :], target])
            raise IgnoreRequest(f"redirect loop: {loop}")
        return response


class SkipBinaryBodies:
    """Stop downloading a body as soon as its headers say it is an image, an archive, a PDF...: the page
    is still reported (with its status and an ``error``), but megabytes of zip are not fetched.

    A downloaded file (:func:`crawler.parse.is_download`: its head says so, or its URL's extension) gets its
    own size cap, ``file_max_bytes`` (FPTRACK_DOWNLOAD_MAX_BYTES), set on its request as its headers arrive:
    Scrapy reads a request's ``download_maxsize`` after this signal, against the announced length and then
    the bytes as they come, so a page keeps DOWNLOAD_MAXSIZE and a file larger than its cap is dropped
    before its body is held."""

    def __init__(self, stats: Any, file_max_bytes: int = 0) -> None:
        self.stats = stats
        self.file_max_bytes = file_max_bytes

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SkipBinaryBodies:
        extension = cls(crawler.stats, crawler.settings.getint(DOWNLOAD_MAXSIZE_SETTING))
        crawler.signals.connect(extension.headers_received, signal=signals.headers_received)
        crawler.signals.connect(extension.bytes_received, signal=signals.bytes_received)
        return extension

    def bytes_received(self, data: bytes, request: Request, spider: object) -> None:
        # The download handler cancels a body over the size cap without saying why when it has no
        # Content-Length; the count lets the spider's errback tell that cancel apart
        # (crawler.parse.describe_failure).
        request.meta[BYTES_RECEIVED] = request.meta.get(BYTES_RECEIVED, 0) + len(data)

    def headers_received(self, headers: Any, body_length: int, request: Request, spider: object) -> None:
        content_type = (headers.get(b"Content-Type") or b"").decode("latin-1")
        if is_binary_media_type(media_type(content_type)) and CHAPTER_IMAGE not in request.meta:
            self.stats.inc_value("fptrack/binary_bodies_skipped")
            raise StopDownload(fail=False)
        disposition = (headers.get(b"Content-Disposition") or b"").decode("latin-1")
        if self.file_max_bytes and is_download(request.url, content_type, disposition):
            request.meta["download_maxsize"] = self.file_max_bytes
