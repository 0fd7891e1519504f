"""The crawl's side of the shared pace per site (:mod:`storage.pacing`): every request Scrapy sends to a site
(pages, redirects, robots.txt, pages rendered in Chromium) first takes its turn, and a site that answers 429,
or 503 with ``Retry-After``, is held for every process that fetches from it, then asked again, slower, until
it answers.

:class:`PaceRequests` is a downloader middleware. Its ``process_request`` runs after the site scope and the
private-address guard have allowed the request (its number is higher than theirs), and before the request
reaches Scrapy's download slot. The database call runs in Twisted's thread pool and the wait is a timer on the
reactor, so the reactor never blocks. In this process at most one request per site waits for a turn at a
time (a per-site lock): the others queue here rather than reserving slots far ahead in the shared pace,
which would keep other processes (a re-check) waiting behind them.

Its ``process_response`` sees a response before Scrapy's RetryMiddleware: a 429 (with or without
``Retry-After``), or a 503 with ``Retry-After``, holds the site and sends the request again; after
:data:`MAX_TRIES` tries, or once the holds of one request add up to ``FPTRACK_RETRY_AFTER_MAX``, the request
fails with the reason (a failure of the crawl, never a page). A 503 without ``Retry-After`` is an ordinary
server error, left to RetryMiddleware.

Counted in the crawl's stats: ``fptrack/requests`` (sent), ``fptrack/peak_requests_per_second`` (the most
sent to one site in any one-second window), ``fptrack/retry_after_waits`` (holds) and
``fptrack/rate_limited_failures`` (requests given up).
"""

from __future__ import annotations

import time
from collections import deque

from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Request, Response
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import DeferredLock

from fptrack.crawler.links import site_of
from fptrack.storage.pacing import BACKOFF_SECONDS, Pacer, retry_after_seconds

__all__ = ["MAX_TRIES", "PACER_SETTING", "PACE_LIMIT_SETTING", "PaceRequests", "rate_limited"]

PACER_SETTING = "FPTRACK_PACER"
"""The Scrapy setting that holds the crawl's :class:`storage.pacing.Pacer` (shared by reference)."""
PACE_LIMIT_SETTING = "FPTRACK_PACE_LIMIT"
"""The crawl's own limit in requests per second (``1 / delay``), 0 for none: the stricter of it and the
site's rate applies."""

MAX_TRIES = 50
"""How many times one request is sent to a site that keeps answering 429 before it fails."""
TRIES_META = "fptrack_rate_limited_tries"
HELD_META = "fptrack_rate_limited_held"


def rate_limited(status: int, retry_after: float | None) -> bool:
    """True when an answer asks the client to slow down: any 429, a 503 that says when to come back."""
    return status == 429 or (status == 503 and retry_after is not None)


class PaceRequests:
    """Take a turn of the site's shared pace before every request; hold the site and try again on a 429 (see
    the module docstring)."""

    def __init__(self, crawler: Crawler, pacer: Pacer, limit: float | None) -> None:
        self.crawler = crawler
        self.pacer = pacer
        self.limit = limit
        self._locks: dict[str, DeferredLock] = {}
        self._recent: dict[str, deque[float]] = {}
        self._last_sent: dict[str, float] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PaceRequests:
        pacer = crawler.settings.get(PACER_SETTING)
        if pacer is None:
            raise NotConfigured("no pacer: the crawl is not run by run_crawl")
        if not isinstance(pacer, Pacer):
            raise TypeError(f"the {PACER_SETTING} setting must hold a storage.pacing.Pacer")
        limit = crawler.settings.getfloat(PACE_LIMIT_SETTING)
        return cls(crawler, pacer, limit if limit > 0 else None)

    async def process_request(self, request: Request, spider: object = None) -> None:
        from twisted.internet import reactor
        from twisted.internet.task import deferLater
        from twisted.internet.threads import deferToThread

        host = site_of(request.url)
        if not host:
            return
        lock = self._locks.setdefault(host, DeferredLock())
        await maybe_deferred_to_future(lock.acquire())
        try:
            while True:
                turn = await maybe_deferred_to_future(deferToThread(self.pacer.take_turn, host, self.limit))
                wait = turn.at - self.pacer.clock()
                if wait <= 0:
                    break
                await maybe_deferred_to_future(deferLater(reactor, wait, lambda: None))
                # a hold placed while this turn was awaited (by this crawl or another process): wait it out
                held = await maybe_deferred_to_future(deferToThread(self.pacer.blocked_until, host))
                if held <= turn.at:
                    break
            # A turn that came late (a busy thread pool, a slow database) must not bunch up with the next one,
            # on time: in this process, two requests to a site start at least one interval apart.
            gap = self._last_sent.get(host, float("-inf")) + turn.interval - time.monotonic()
            if gap > 0:
                await maybe_deferred_to_future(deferLater(reactor, gap, lambda: None))
            self._last_sent[host] = time.monotonic()
        finally:
            lock.release()
        self._count(host)

    def _count(self, host: str) -> None:
        stats = self.crawler.stats
        if stats is None:
            return
        stats.inc_value("fptrack/requests")
        now = time.monotonic()
        recent = self._recent.setdefault(host, deque())
        recent.append(now)
        # requests less than a second apart share a window; 5 ms of slack for the timers' granularity (a
        # turn one interval after the last may fire a hair early), so a pace of 1/s reads 1, not 2
        while recent and recent[0] <= now - 1.0 + 0.005:
            recent.popleft()
        stats.max_value("fptrack/peak_requests_per_second", len(recent))

    async def process_response(
        self, request: Request, response: Response, spider: object = None
    ) -> Request | Response:
        from twisted.internet.threads import deferToThread

        retry_after = retry_after_seconds(response.headers.get(b"Retry-After"))
        if not rate_limited(response.status, retry_after):
            return response
        host = site_of(request.url)
        tries = int(request.meta.get(TRIES_META, 0)) + 1
        seconds = retry_after if retry_after is not None else BACKOFF_SECONDS * 2 ** min(tries - 1, 4)
        held = await maybe_deferred_to_future(deferToThread(self.pacer.hold, host, seconds))
        total = float(request.meta.get(HELD_META, 0.0)) + held
        stats = self.crawler.stats
        if stats is not None:
            stats.inc_value("fptrack/retry_after_waits")
        if tries >= MAX_TRIES or total >= self.pacer.settings.retry_after_max:
            if stats is not None:
                stats.inc_value("fptrack/rate_limited_failures")
            raise IgnoreRequest(
                f"HTTP {response.status}: the site kept asking to slow down; gave up after {tries} tries "
                f"and {total:.0f} s of Retry-After waits (FPTRACK_RETRY_AFTER_MAX)"
            )
        again = request.replace(dont_filter=True)
        again.meta[TRIES_META] = tries
        again.meta[HELD_META] = total
        return again

    def __repr__(self) -> str:  # shown in Scrapy's log of enabled middlewares
        return f"PaceRequests(limit={self.limit!r})"
