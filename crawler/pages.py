"""The values the crawler hands to the rest of fptrack: one per fetched response, one per crawl."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from fptrack.core.errors import FptrackError
from fptrack.crawler.leads import ShareLink

__all__ = [
    "DOWNLOAD_MAXSIZE_SETTING",
    "RENDER_JS_MODES",
    "CrawlError",
    "CrawlFailure",
    "CrawlOptions",
    "CrawlProgress",
    "CrawlStats",
    "CrawledPage",
]

DOWNLOAD_MAXSIZE_SETTING = "FPTRACK_DOWNLOAD_MAXSIZE"
"""The Scrapy setting of a downloaded file's size cap (FPTRACK_DOWNLOAD_MAX_BYTES; crawler.middlewares)."""


class CrawlError(FptrackError):
    """A crawl was asked for with bad arguments (a start URL that is not http(s), max_pages < 1, ...)."""


@dataclass(frozen=True)
class CrawledPage:
    """One fetched response, decoded and reduced to its main text.

    ``text`` is the extracted main text, paragraphs separated by ``"\\n"``, only whitespace tidied (the
    fingerprint stage normalises; match offsets refer to this exact string). It is ``''`` for non-200
    responses and non-text bodies, and ``error`` then says why. ``note`` says what was cut or repaired on a
    page that has text (text over the character cap, links over the link cap, nesting flattened), ``';
    '``-joined. ``not_modified`` marks a 304 answer to a conditional request: the page as stored is still
    current."""

    url: str
    final_url: str
    status: int
    encoding: str
    title: str
    text: str
    content_sha256: str
    snapshot_sha256: str
    fetched_at: datetime
    error: str = ""
    note: str = ""
    # validators of a 200 response (sent back on the next crawl: conditional requests, crawler/conditional.py)
    etag: str = ""
    last_modified: str = ""
    # a 304 to a conditional request: the stored page is still current (nothing else of this value is
    # meaningful)
    not_modified: bool = False
    next_part_url: str = ""  # the next part of a chapter split over pages ("下一页"), see crawler.multipage
    listing: bool = False  # it lists other pages (an entry, a table of contents): re-crawls fetch it again
    # cloud-drive share links the page names (crawler.leads), recorded as leads when the page is stored
    share_links: tuple[ShareLink, ...] = ()


@dataclass(frozen=True)
class CrawlStats:
    """What one crawl did. ``failures`` are requests that got no HTTP response at all."""

    pages_seen: int
    pages_with_text: int
    by_status: Mapping[int, int]
    failures: tuple[tuple[str, str], ...]
    elapsed_seconds: float
    sink_errors: int = 0
    finish_reason: str = ""  # Scrapy's: "finished", "closespider_...", "shutdown" (Ctrl+C), "store_failed"
    # namespaced Scrapy stats: fptrack/..., robotstxt/...
    counters: Mapping[str, int] = field(default_factory=dict)
    # how the crawl ran, when it is not as asked (e.g. JS rendering off: no Chromium)
    notes: tuple[str, ...] = ()

    @property
    def interrupted(self) -> bool:
        """True when the crawl was stopped (Ctrl+C, SIGTERM) rather than finishing or reaching its limit."""
        return self.finish_reason == "shutdown"


@dataclass(frozen=True)
class CrawlProgress:
    """Passed to the progress callback after each page has been handed to the sink."""

    pages_seen: int
    max_pages: int
    last_url: str
    last_status: int


@dataclass(frozen=True)
class CrawlFailure:
    """A request that ended without a response (internal item type: spider errback -> pipelines)."""

    url: str
    reason: str


RENDER_JS_MODES = ("auto", "yes", "no")


@dataclass(frozen=True)
class CrawlOptions:
    """How one crawl behaves beyond its start URLs and limits: a managed site's settings
    (:func:`jobs.sites.crawl_options`) or the options of ``fptrack crawl``. ``None`` means: the global
    setting.

    - ``allowed_hosts``: more sites (``host`` or ``host:port``) that links may lead to;
    - ``include`` / ``exclude``: regular expressions (``re.search``) on link URLs: a link is followed when it
      matches one ``include`` pattern (or none are given) and no ``exclude`` pattern; start URLs always are;
    - ``allow_private_hosts``: entries added to ``FPTRACK_ALLOW_PRIVATE_HOSTS`` for this crawl;
    - ``delay``, ``concurrency``, ``obey_robots``: per-site politeness;
    - ``render_js``: ``auto`` | ``yes`` | ``no`` (pages built by scripts);
    - ``scrapy_settings``: Scrapy settings passed through (``fptrack crawl -s NAME=VALUE``), applied last.
    """

    allowed_hosts: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    allow_private_hosts: tuple[str, ...] = ()
    delay: float | None = None
    concurrency: int | None = None
    obey_robots: bool | None = None
    render_js: str = "auto"
    scrapy_settings: tuple[tuple[str, str], ...] = ()
