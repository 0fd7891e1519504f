"""The crawl's side of the shared pace per site (:mod:`storage.pacing`): every request Scrapy sends to a site
(pages, redirects, robots.txt, pages rendered in Chromium) first takes its turn, and a site that answers 429,
or 503 with ``Retry-After``, is held for every process that fetches from it, then asked again, slower, until
it answers.

:class:`PaceRequests` is a downloader middleware. ``process_request`` runs after the site scope and the
private-address guard (its number is higher than theirs) and before Scrapy's download slot; the database call
runs in Twisted's thread pool and the wait is a reactor timer. At most one request per site waits for a turn
at a time in this process, so that the others do not reserve slots far ahead of other processes.

``process_response`` runs before Scrapy's RetryMiddleware: a 429, or a 503 with ``Retry-After``, holds the
site and sends the request again; after :data:`MAX_TRIES` tries, or once one request's holds add up to
``FPTRACK_RETRY_AFTER_MAX``, the request fails with the reason. A 503 without ``Retry-After`` is left to
RetryMiddleware.

A site paced faster than one request every :data:`BLOCK_SECONDS` takes its turns a block at a time: one turn
at ``1 / n`` of the site's rate reserves a window of ``n`` slots, spent one request per slot on the reactor
with no database write, so the site sees the same rate and a fast pace costs one write per block, not per
request (on SQLite each write waits for every other writer of the file).

Stats: ``fptrack/requests``, ``fptrack/peak_requests_per_second``, ``fptrack/retry_after_waits`` and
``fptrack/rate_limited_failures``.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Request, Response
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import DeferredLock

from fptrack.crawler.links import site_of
from fptrack.storage.pacing import BACKOFF_SECONDS, Pacer, Turn, retry_after_seconds

__all__ = [
    "BLOCK_SECONDS",
    "MAX_TRIES",
    "PACER_SETTING",
    "PACE_LIMIT_SETTING",
    "PaceRequests",
    "block_size",
    "rate_limited",
]

PACER_SETTING = "FPTRACK_PACER"
"""The Scrapy setting that holds the crawl's :class:`storage.pacing.Pacer` (shared by reference)."""
PACE_LIMIT_SETTING = "FPTRACK_PACE_LIMIT"
"""The crawl's own limit in requests per second (``1 / delay``), 0 for none: the stricter of it and the
site's rate applies."""

MAX_TRIES = 50
"""How many times one request is sent to a site that keeps answering 429 before it fails."""
BLOCK_SECONDS = 0.25
"""The longest window of a site's pace one turn reserves for this process (module docstring): a site allowing
``r`` requests a second gets blocks of ``floor(r x BLOCK_SECONDS)`` slots (at most :data:`MAX_BLOCK`); below 8
requests a second, blocks of one or two."""
MAX_BLOCK = 1024
TRIES_META = "fptrack_rate_limited_tries"
HELD_META = "fptrack_rate_limited_held"


@dataclass
class _Block:
    """Slots of a site's pace reserved by one turn: ``size`` slots ``spacing`` seconds apart from ``first``
    (Unix seconds); ``taken`` of them spent. Valid until its window ends: a slot not used by then is gone."""

    first: float
    spacing: float
    size: int
    taken: int = 1

    def next_turn(self, host: str, now: float) -> Turn | None:
        """The next slot, or None when the block is spent or its window is over."""
        if self.taken >= self.size or now >= self.first + self.spacing * self.size:
            return None
        at = self.first + self.spacing * self.taken
        self.taken += 1
        return Turn(host=host, at=at, interval=self.spacing)


def block_size(rate: float) -> int:
    """Slots per turn at ``rate`` requests a second (see :data:`BLOCK_SECONDS`)."""
    return min(MAX_BLOCK, max(1, int(rate * BLOCK_SECONDS)))


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
        self._blocks: dict[str, _Block] = {}  # host -> the slots reserved and not spent yet (reactor only)

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
                block = self._blocks.get(host)
                turn = block.next_turn(host, self.pacer.clock()) if block is not None else None
                fresh = turn is None
                if fresh:
                    turn, block = await maybe_deferred_to_future(deferToThread(self._take_turns, host))
                    if block is not None:
                        self._blocks[host] = block
                    else:
                        self._blocks.pop(host, None)
                assert turn is not None  # taken from the block or from the shared pace
                wait = turn.at - self.pacer.clock()
                if wait <= 0:
                    break
                await maybe_deferred_to_future(deferLater(reactor, wait, lambda: None))
                if not fresh:
                    break  # a slot of a block: a hold placed since is seen by the next turn (docstring)
                # a hold placed while this turn was awaited (by this crawl or another process): wait it out
                held = await maybe_deferred_to_future(deferToThread(self.pacer.blocked_until, host))
                if held <= turn.at:
                    break
                self._blocks.pop(host, None)
            # A turn that came late (a busy thread pool, a slow database) must not bunch up with the next one,
            # on time: in this process, two requests to a site start at least one interval apart.
            gap = self._last_sent.get(host, float("-inf")) + turn.interval - time.monotonic()
            if gap > 0:
                await maybe_deferred_to_future(deferLater(reactor, gap, lambda: None))
            self._last_sent[host] = time.monotonic()
        finally:
            lock.release()
        self._count(host)

    def _take_turns(self, host: str) -> tuple[Turn, _Block | None]:
        """In a thread (the rate may be read and the turn is a statement): a turn of the shared pace, for one
        request or for a block of them (:data:`BLOCK_SECONDS`); returns the first slot, and the block when it
        holds more."""
        rate = self.pacer.rate_of(host, self.limit)
        size = block_size(rate)
        if size == 1:
            return self.pacer.take_turn(host, self.limit), None
        # one turn at 1/size of the rate is one slot size times as long: the window of the block
        turn = self.pacer.take_turn(host, rate / size)
        block = _Block(first=turn.at, spacing=turn.interval / size, size=size)
        return Turn(host=host, at=turn.at, interval=block.spacing), block

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
        self._blocks.pop(host, None)  # no slot reserved before the hold is spent inside its window
        tries = int(request.meta.get(TRIES_META, 0)) + 1
        seconds = retry_after if retry_after is not None else BACKOFF_SECONDS * 2 ** min(tries - 1, 4)
        held = await maybe_deferred_to_future(deferToThread(self.pacer.hold, host, seconds))
        self._blocks.pop(host, None)  # nor one reserved while the hold was written
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
