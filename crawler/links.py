"""Which URLs a crawl may request: http(s) only, fragments stripped, on the start URLs' sites only."""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import urldefrag

from fptrack.crawler.pages import CrawlError
from fptrack.storage import sites

__all__ = ["links_to_follow", "request_url", "site_of"]


# A URL's site is asked for several times on its way through a crawl (scope, pace, conditional request,
# links of the pages that point to it): each worked out once.
site_of = lru_cache(maxsize=8192)(sites.site_of)


def request_url(url: str) -> str:
    """A start URL as it will be requested (fragment removed); :class:`CrawlError` when it cannot be."""
    cleaned = url.strip()
    if not site_of(cleaned):
        raise CrawlError(f"cannot crawl {url!r}: expected an http:// or https:// URL with a host name")
    return urldefrag(cleaned).url


def links_to_follow(links: Iterable[str], allowed_sites: frozenset[str]) -> tuple[list[str], int]:
    """The links to request from a page, and how many were dropped for being on another site.

    Fragments are stripped and duplicates dropped (first occurrence kept); links that are not http(s)
    are dropped without being counted as off-site.
    """
    kept: dict[str, None] = {}
    off_site = 0
    for link in links:
        url = urldefrag(link.strip()).url
        site = site_of(url)
        if not site:
            continue
        if site not in allowed_sites:
            off_site += 1
            continue
        kept.setdefault(url, None)
    return list(kept), off_site
