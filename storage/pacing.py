"""The shared pace of requests per site: everything that fetches from a site (crawls in any process or on any
machine, re-checks, rendering) takes its turn here, so that together they keep the site's rate, and a site
that asks to slow down (429 or 503 with ``Retry-After``) is left alone by all of them until the window ends.

The pace of a site is one ``host_pacing`` row (:class:`storage.models.HostPacing`). Taking a turn is one
atomic upsert that reserves the next free slot and moves ``next_at`` one interval past it::

    slot    = max(next_at, now, blocked_until)
    next_at = slot + interval

so two processes never get the same slot, however many there are, and neither needs a lock of its own. The
caller then sleeps until its slot. A ``hold`` (a Retry-After) sets ``blocked_until`` and doubles the
interval; each later turn brings the interval back toward ``1 / rate`` by a few percent, so a site that
rate-limits is crawled to the end, slower, and its pace recovers gradually once it stops complaining.

Times are Unix seconds from the clock of the process (``time.time``): processes on several machines share a
pace as well as their clocks agree.

Without a database (``sessions=None``) the same arithmetic runs in memory, for this process alone: a crawl
that hands its pages to a callback rather than to the database, or a client in a test.
"""

from __future__ import annotations

import email.utils
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker

from fptrack.core.settings import Settings
from fptrack.storage.db import retry_in_session
from fptrack.storage.models import HostPacing, Site

__all__ = [
    "BACKOFF_SECONDS",
    "MAX_INTERVAL",
    "Pacer",
    "Turn",
    "retry_after_seconds",
]

# The interval never grows past this after holds (unless the site's own rate is slower still): a site that
# rate-limits is crawled slowly, never abandoned.
MAX_INTERVAL = 30.0
# How much of the extra interval each turn gives back (the interval is multiplied by this, down to 1 / rate):
# about 14 turns from a doubled interval back to the site's rate.
RECOVERY = 0.95
# A pace not used for this long starts again at the site's rate: an old hold says nothing about today.
FORGET_AFTER = 600.0
# A 429 without Retry-After holds the site this long (doubled on each try of the same request, by the caller).
BACKOFF_SECONDS = 5.0
# How long a site's rate read from ``sites.rate`` is trusted before it is read again.
RATE_CACHE_SECONDS = 60.0


@dataclass(frozen=True)
class Turn:
    """A reserved slot: the request may start at ``at`` (Unix seconds); ``interval`` is the site's spacing
    now (larger than ``1 / rate`` after a hold)."""

    host: str
    at: float
    interval: float


def retry_after_seconds(value: str | bytes | None, now: float | None = None) -> float | None:
    """The seconds a ``Retry-After`` header asks for (a number of seconds or an HTTP date), or None when the
    header is missing or unreadable. Never negative."""
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("latin-1", errors="replace")
    value = value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if math.isnan(seconds) or math.isinf(seconds):
        return None
    return max(0.0, seconds)


# One statement per turn: insert the pace of a site not seen yet (its first request goes now), or reserve the
# next slot of an existing one. In ``DO UPDATE SET`` every expression reads the row as it was, so ``next_at``
# is computed with the new interval from the old values. "interval" is a keyword in PostgreSQL: quoted.
_TURN_SQL = """
INSERT INTO host_pacing (host, next_at, "interval", blocked_until, requests, updated_at)
VALUES (:host, :now + :base, :base, 0, 1, :now)
ON CONFLICT (host) DO UPDATE SET
    "interval" = {new_interval},
    next_at = {greatest}(host_pacing.next_at, :now, host_pacing.blocked_until) + {new_interval},
    requests = host_pacing.requests + 1,
    updated_at = :now
RETURNING next_at, "interval"
"""
_NEW_INTERVAL = (
    "CASE WHEN :now - host_pacing.updated_at > :forget THEN :base "
    'ELSE {greatest}(:base, {least}(host_pacing."interval", :cap) * :recovery) END'
)
# A hold: nothing before ``until``; the interval doubles once per hold (not for each answer of a burst that
# was already in flight when the site started to complain).
_HOLD_SQL = """
INSERT INTO host_pacing (host, next_at, "interval", blocked_until, requests, updated_at)
VALUES (:host, :until, {least}(:cap, :base * 2), :until, 0, :now)
ON CONFLICT (host) DO UPDATE SET
    "interval" = CASE WHEN host_pacing.blocked_until > :now THEN host_pacing."interval"
                 ELSE {least}(:cap, {greatest}(host_pacing."interval", :base) * 2) END,
    blocked_until = {greatest}(host_pacing.blocked_until, :until),
    updated_at = :now
"""


def _dialect_sql(template: str, dialect: str) -> str:
    # PostgreSQL's GREATEST/LEAST; SQLite's max()/min() with several arguments are the same scalar functions.
    greatest, least = ("GREATEST", "LEAST") if dialect == "postgresql" else ("max", "min")
    new_interval = _NEW_INTERVAL.format(greatest=greatest, least=least)
    return template.format(greatest=greatest, least=least, new_interval=new_interval)


@dataclass
class _MemoryPace:
    next_at: float = 0.0
    interval: float = 0.0
    blocked_until: float = 0.0
    requests: int = 0
    updated_at: float = 0.0


class Pacer:
    """The shared pace of requests per site (see the module docstring).

    ``sessions`` is the database the pace is shared through; None keeps it in this process. ``clock`` (Unix
    seconds) and ``sleep`` are injectable so that tests need not wait. Safe to use from several threads."""

    def __init__(
        self,
        sessions: sessionmaker[Session] | None,
        settings: Settings,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.sessions = sessions
        self.settings = settings
        self.clock = clock
        self.sleep = sleep
        self._lock = threading.Lock()
        self._memory: dict[str, _MemoryPace] = {}
        self._rates: dict[str, tuple[float, float]] = {}  # host -> (rate, read at)
        self._sql: dict[str, str] = {}

    def __deepcopy__(self, memo: dict[int, Any]) -> Pacer:
        return self  # shared on purpose: Scrapy deep-copies its settings, the pace is one per process

    # ------------------------------------------------------------------------------------------------ rate

    def rate_of(self, host: str, limit: float | None = None) -> float:
        """Requests per second at most to ``host``: the site's ``sites.rate`` when set, else
        ``FPTRACK_SITE_RATE``; ``limit`` (the caller's own, e.g. ``1 / delay``) wins when it is stricter."""
        rate = self._site_rate(host)
        if limit is not None and limit > 0:
            rate = min(rate, limit)
        return rate

    def _site_rate(self, host: str) -> float:
        default = self.settings.site_rate
        if self.sessions is None:
            return default
        now = self.clock()
        with self._lock:
            cached = self._rates.get(host)
        if cached is not None and now - cached[1] < RATE_CACHE_SECONDS:
            return cached[0]

        def read(session: Session) -> float | None:
            return session.scalar(select(Site.rate).where(Site.host == host))

        rate = retry_in_session(self.sessions, read, what=f"reading the rate of {host}")
        value = float(rate) if rate is not None and rate > 0 else default
        with self._lock:
            self._rates[host] = (value, now)
        return value

    # ------------------------------------------------------------------------------------------------ turns

    def take_turn(self, host: str, limit: float | None = None) -> Turn:
        """Reserve the next slot for one request to ``host`` (one statement); the caller waits until
        ``Turn.at`` before sending it (:meth:`wait_turn` does both)."""
        base = 1.0 / self.rate_of(host, limit)
        cap = max(MAX_INTERVAL, base)
        now = self.clock()
        if self.sessions is None:
            return self._memory_turn(host, now, base, cap)
        params = {
            "host": host,
            "now": now,
            "base": base,
            "cap": cap,
            "recovery": RECOVERY,
            "forget": FORGET_AFTER,
        }

        def reserve(session: Session) -> tuple[float, float]:
            sql = self._statement(session, "turn", _TURN_SQL)
            row = session.execute(text(sql), params).one()
            return float(row[0]), float(row[1])

        next_at, interval = retry_in_session(self.sessions, reserve, what=f"taking a turn for {host}")
        return Turn(host=host, at=next_at - interval, interval=interval)

    def _memory_turn(self, host: str, now: float, base: float, cap: float) -> Turn:
        with self._lock:
            pace = self._memory.get(host)
            if pace is None:
                pace = self._memory[host] = _MemoryPace(next_at=now, interval=base)
            elif now - pace.updated_at > FORGET_AFTER:
                pace.interval = base
            else:
                pace.interval = max(base, min(pace.interval, cap) * RECOVERY)
            at = max(pace.next_at, now, pace.blocked_until)
            pace.next_at = at + pace.interval
            pace.requests += 1
            pace.updated_at = now
            return Turn(host=host, at=at, interval=pace.interval)

    def blocked_until(self, host: str) -> float:
        """When the current hold on ``host`` ends (0 or a past time when it is not held)."""
        if self.sessions is None:
            with self._lock:
                pace = self._memory.get(host)
                return pace.blocked_until if pace is not None else 0.0

        def read(session: Session) -> float:
            value = session.scalar(select(HostPacing.blocked_until).where(HostPacing.host == host))
            return float(value or 0.0)

        return retry_in_session(self.sessions, read, what=f"reading the hold on {host}")

    def wait_turn(self, host: str, rate: float | None = None) -> None:
        """Block until this process may send one request to ``host`` (``rate``: the caller's own limit in
        requests per second, applied when stricter than the site's). A hold another process (or this one)
        placed while this turn was awaited is honoured: the turn is taken again after it."""
        while True:
            turn = self.take_turn(host, rate)
            wait = turn.at - self.clock()
            if wait <= 0:
                return
            self.sleep(wait)
            if self.blocked_until(host) <= turn.at:
                return

    # ------------------------------------------------------------------------------------------------ holds

    def hold(self, host: str, seconds: float) -> float:
        """The site asked to slow down (a 429, or a 503 with ``Retry-After``): nothing is sent to it for
        ``seconds`` (at most ``FPTRACK_RETRY_AFTER_MAX``), by any process, and it is paced slower afterwards.
        Returns the seconds actually held."""
        seconds = min(max(0.0, seconds), self.settings.retry_after_max)
        base = 1.0 / self.rate_of(host)
        cap = max(MAX_INTERVAL, base)
        now = self.clock()
        until = now + seconds
        if self.sessions is None:
            with self._lock:
                pace = self._memory.setdefault(host, _MemoryPace(next_at=now, interval=base, updated_at=now))
                if pace.blocked_until <= now:
                    pace.interval = min(cap, max(pace.interval, base) * 2)
                pace.blocked_until = max(pace.blocked_until, until)
                pace.updated_at = now
            return seconds
        params = {"host": host, "now": now, "until": until, "base": base, "cap": cap}

        def write(session: Session) -> None:
            session.execute(text(self._statement(session, "hold", _HOLD_SQL)), params)

        retry_in_session(self.sessions, write, what=f"holding requests to {host}")
        return seconds

    def _statement(self, session: Session, name: str, template: str) -> str:
        dialect = session.get_bind().dialect.name
        key = f"{name}:{dialect}"
        sql = self._sql.get(key)
        if sql is None:
            sql = self._sql[key] = _dialect_sql(template, dialect)
        return sql
