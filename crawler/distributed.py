"""Crawls shared across processes and machines: one frontier in Redis, through scrapy-redis.

A distributed crawl is still one crawl job. Its processes (any number, on any machines that reach the same
Redis and the same database) share:

- the **frontier**: scrapy-redis's scheduler (a Redis sorted set; breadth first, as a local crawl) and its
  **dupefilter** (a Redis set of request fingerprints), so every URL is fetched once by one of them;
- the **page budget**: ``max_pages`` counts responses of all processes (a Redis counter, ``INCR``);
- the **job**: the first process creates the ``crawl_jobs`` row and seeds the start URLs; the others join,
  read the job's id, depth and limit from Redis and store their pages into the same job through the same
  pipeline (:mod:`crawler.store`);
- the **end**: a process stops when the frontier is empty and no process is busy (each says in Redis when it
  holds requests; one whose heartbeat stopped for ``FPTRACK_CRAWL_STALE_SECONDS`` no longer counts), or when
  the budget is spent. Each process then adds its counts to the run's totals; the last one to leave settles
  the sites, writes the job's totals and removes the run's keys.

Each process keeps everything a local crawl has: the private-address guard, robots.txt, politeness (per
process: N processes may send N x ``concurrency`` requests to the site at a time), depth, include/exclude.

Key layout (``<site>`` is the site key, e.g. ``books.example`` or ``127.0.0.1:8000``; ``<run>`` a random id
per crawl, so a new crawl starts fresh and two sites never mix)::

    fptrack:crawl:<site>:current           the run now crawling the site (what joiners join)
    fptrack:crawl:<site>:<run>:state       hash: status (running / finishing), job id, depth, max pages
    fptrack:crawl:<site>:<run>:requests    scrapy-redis queue (sorted set of pickled requests)
    fptrack:crawl:<site>:<run>:dupefilter  scrapy-redis dupefilter (set of request fingerprints)
    fptrack:crawl:<site>:<run>:pages       responses taken from the budget
    fptrack:crawl:<site>:<run>:members     processes in the run that have not left
    fptrack:crawl:<site>:<run>:busy        set: processes holding requests
    fptrack:crawl:<site>:<run>:alive       hash: process -> Redis time of its last heartbeat
    fptrack:crawl:<site>:<run>:totals      hash: counts added by each process as it leaves
    fptrack:crawl:<site>:<run>:failures    list: failed requests (url, reason) as JSON
    fptrack:crawl:<site>:<run>:errors      list: errors of processes whose part failed

Only these keys are ever written or deleted (never ``FLUSHDB``); every one expires :data:`KEY_TTL_SECONDS`
after the last heartbeat, so a crawl whose processes all died leaves nothing behind for long."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from fptrack.core.settings import Settings
from fptrack.crawler.pages import CrawlError, CrawlStats

__all__ = [
    "KEY_PREFIX",
    "SHARED_SETTING",
    "CrawlKeys",
    "DistributedError",
    "JoinedRun",
    "SharedCrawl",
    "SharedScheduler",
    "crawl_redis_url",
    "scrapy_redis_settings",
    "url_without_password",
]

log = logging.getLogger(__name__)

KEY_PREFIX = "fptrack:crawl"
SHARED_SETTING = "FPTRACK_SHARED_CRAWL"
KEY_TTL_SECONDS = 3600
HEARTBEAT_SECONDS = 2.0
IDLE_POLL_SECONDS = 0.25
JOB_WAIT_SECONDS = 30.0
MAX_FAILURES_KEPT = 200


class DistributedError(CrawlError):
    """A distributed crawl cannot start or join (no Redis configured or reachable, nothing to join)."""


def crawl_redis_url(settings: Settings) -> str:
    """The Redis of distributed crawls: ``FPTRACK_CRAWL_REDIS_URL``, else the broker when it is Redis."""
    if settings.crawl_redis_url:
        url = settings.crawl_redis_url
        if urlsplit(url).scheme not in ("redis", "rediss", "unix"):
            raise DistributedError(f"FPTRACK_CRAWL_REDIS_URL={url!r}: expected a redis:// URL")
        return url
    broker = settings.broker_url or ""
    if urlsplit(broker).scheme in ("redis", "rediss"):
        return broker
    raise DistributedError(
        "a distributed crawl needs Redis: set FPTRACK_CRAWL_REDIS_URL (e.g. redis://127.0.0.1:6379/0) "
        "or a redis:// FPTRACK_BROKER_URL"
    )


def url_without_password(url: str) -> str:
    """A Redis (or any broker) URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password:
        netloc = f"{parts.username or ''}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        return parts._replace(netloc=netloc).geturl()
    return url


@dataclass(frozen=True)
class CrawlKeys:
    """The Redis keys of one run of a distributed crawl of one site (see the module docstring)."""

    site: str
    run: str

    @staticmethod
    def current_of(site: str) -> str:
        return f"{KEY_PREFIX}:{site}:current"

    @property
    def base(self) -> str:
        return f"{KEY_PREFIX}:{self.site}:{self.run}"

    @property
    def state(self) -> str:
        return f"{self.base}:state"

    @property
    def requests(self) -> str:
        return f"{self.base}:requests"

    @property
    def dupefilter(self) -> str:
        return f"{self.base}:dupefilter"

    @property
    def pages(self) -> str:
        return f"{self.base}:pages"

    @property
    def members(self) -> str:
        return f"{self.base}:members"

    @property
    def busy(self) -> str:
        return f"{self.base}:busy"

    @property
    def alive(self) -> str:
        return f"{self.base}:alive"

    @property
    def totals(self) -> str:
        return f"{self.base}:totals"

    @property
    def failures(self) -> str:
        return f"{self.base}:failures"

    @property
    def errors(self) -> str:
        return f"{self.base}:errors"

    def run_keys(self) -> list[str]:
        """Every key of the run (what :meth:`SharedCrawl.remove_keys` deletes)."""
        return [getattr(self, name) for name in _RUN_KEYS]


_RUN_KEYS = (
    "state",
    "requests",
    "dupefilter",
    "pages",
    "members",
    "busy",
    "alive",
    "totals",
    "failures",
    "errors",
)

# Join the running crawl of the site when there is one with a live process (mode 'any' or 'join'), else start
# a new run (mode 'any' or 'new'). Atomic, so two processes starting at once make one run.
_START_OR_JOIN = """
local current, prefix, new_run, member, mode = KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local stale, ttl, params = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local now = tonumber(redis.call('TIME')[1])
local run = redis.call('GET', current)
if run and mode ~= 'new' then
  local base = prefix .. run
  if redis.call('HGET', base .. ':state', 'status') == 'running' then
    local live = false
    for _, seen in ipairs(redis.call('HVALS', base .. ':alive')) do
      if now - tonumber(seen) <= stale then live = true end
    end
    if live then
      redis.call('INCR', base .. ':members')
      redis.call('SADD', base .. ':busy', member)
      redis.call('HSET', base .. ':alive', member, now)
      return {'joined', run}
    end
  end
end
if mode == 'join' then return {'none', ''} end
local base = prefix .. new_run
redis.call('SET', current, new_run, 'EX', ttl)
redis.call('HSET', base .. ':state', 'status', 'running', 'params', params)
redis.call('SET', base .. ':members', 1)
redis.call('SADD', base .. ':busy', member)
redis.call('HSET', base .. ':alive', member, now)
for _, suffix in ipairs({':state', ':members', ':busy', ':alive'}) do \
redis.call('EXPIRE', base .. suffix, ttl) end
return {'first', new_run}
"""

# An idle process asks whether the crawl is over: it is no longer busy; processes whose heartbeat stopped no
# longer count as busy. Returns 2 when the page budget is spent, 1 when the frontier is empty and nobody is
# busy, else 0.
_IDLE = """
local busy, alive, requests, pages = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local member, stale, max_pages = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('SREM', busy, member)
local now = tonumber(redis.call('TIME')[1])
for _, other in ipairs(redis.call('SMEMBERS', busy)) do
  local seen = tonumber(redis.call('HGET', alive, other) or '0')
  if now - seen > stale then redis.call('SREM', busy, other) end
end
if tonumber(redis.call('GET', pages) or '0') >= max_pages then return 2 end
if redis.call('ZCARD', requests) == 0 and redis.call('SCARD', busy) == 0 then return 1 end
return 0
"""

_HEARTBEAT = """
local now = redis.call('TIME')[1]
redis.call('HSET', KEYS[1], ARGV[1], now)
for i = 2, #KEYS do redis.call('EXPIRE', KEYS[i], tonumber(ARGV[2])) end
return now
"""

# A process leaves the run (after adding its totals); the last one to leave is told so (1) and finishes the
# job.
_LEAVE = """
local members, state, busy, alive, member = KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1]
redis.call('SREM', busy, member)
redis.call('HDEL', alive, member)
if redis.call('DECR', members) <= 0 then
  redis.call('HSET', state, 'status', 'finishing')
  return 1
end
return 0
"""

_FORGET_CURRENT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""


@dataclass(frozen=True)
class JoinedRun:
    """What :meth:`SharedCrawl.enter` found: this process's role and the run's parameters."""

    role: str  # 'first' (created the run: creates the job and seeds the start URLs) or 'joined'
    run: str
    depth: int
    max_pages: int


@dataclass
class CrawlPart:
    """The counts one process adds to the run's totals when it leaves."""

    stats: CrawlStats | None
    stored: int = 0
    unchanged: int = 0
    to_compare: int = 0
    interrupted: bool = False
    error: str = ""


class SharedCrawl:
    """This process's handle on a distributed crawl of one site (see the module docstring).

    Created before the crawl (:meth:`connect`), entered once (:meth:`enter`), handed to Scrapy through the
    :data:`SHARED_SETTING` setting (the scheduler and the spider use it), left once (:meth:`leave`)."""

    def __init__(
        self, client: Any, url: str, site: str, *, stale_seconds: float, member: str | None = None
    ) -> None:
        self.client = client
        self.url = url
        self.site = site
        self.stale_seconds = stale_seconds
        self.member = member or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.keys: CrawlKeys | None = None
        self.joined: JoinedRun | None = None
        self.idle = False  # this process holds no request (set when Scrapy says it is idle)
        self._stop_beating = threading.Event()
        self._beating: threading.Thread | None = None
        self._scripts = {
            name: client.register_script(body)
            for name, body in (
                ("start", _START_OR_JOIN),
                ("idle", _IDLE),
                ("heartbeat", _HEARTBEAT),
                ("leave", _LEAVE),
                ("forget", _FORGET_CURRENT),
            )
        }

    def __deepcopy__(self, memo: dict[int, Any]) -> SharedCrawl:
        return self  # travels through Scrapy's settings, which are deep-copied; shared on purpose

    @classmethod
    def connect(cls, settings: Settings, site: str) -> SharedCrawl:
        """Connect to the crawl Redis (:func:`crawl_redis_url`); :class:`DistributedError` in one line when it
        is not configured or does not answer."""
        import redis

        url = crawl_redis_url(settings)
        try:
            client = redis.Redis.from_url(
                url, socket_connect_timeout=5, socket_timeout=30, health_check_interval=30
            )
            client.ping()
        except (redis.RedisError, ValueError, OSError) as error:
            raise DistributedError(
                f"cannot reach the crawl Redis at {url_without_password(url)}: {error}"
            ) from None
        return cls(client, url, site, stale_seconds=settings.crawl_stale_seconds)

    # ------------------------------------------------------------------------------------------- the run

    def enter(self, *, depth: int, max_pages: int, mode: str = "any") -> JoinedRun:
        """Join the running crawl of the site, or start a new run (``mode``: ``any``; ``join``: only join,
        :class:`DistributedError` when none runs; ``new``: always a new run, for the holder of the site's
        claim)."""
        params = json.dumps({"depth": depth, "max_pages": max_pages})
        role, run = (
            _text(v)
            for v in self._scripts["start"](
                keys=[CrawlKeys.current_of(self.site)],
                args=[
                    f"{KEY_PREFIX}:{self.site}:",
                    uuid.uuid4().hex[:12],
                    self.member,
                    mode,
                    self.stale_seconds,
                    KEY_TTL_SECONDS,
                    params,
                ],
            )
        )
        if role == "none":
            raise DistributedError(f"no distributed crawl of {self.site} is running to join")
        self.keys = CrawlKeys(self.site, run)
        if role == "joined":
            stored = json.loads(_text(self.client.hget(self.keys.state, "params") or "{}"))
            depth, max_pages = int(stored.get("depth", depth)), int(stored.get("max_pages", max_pages))
        self.joined = JoinedRun(role=role, run=run, depth=depth, max_pages=max_pages)
        self.idle = False
        # From now until it leaves (the crawl, then waiting for the workers) this process shows it is alive.
        self._beating = threading.Thread(target=self._beat, name="fptrack-crawl-heartbeat", daemon=True)
        self._beating.start()
        log.info("%s distributed crawl %s of %s", "started" if role == "first" else "joined", run, self.site)
        return self.joined

    @property
    def first(self) -> bool:
        return self.joined is not None and self.joined.role == "first"

    def publish_job(self, job_id: int) -> None:
        """The first process tells the others which crawl job they store into."""
        self.client.hset(self._keys().state, "job_id", job_id)

    def wait_for_job(self, timeout: float = JOB_WAIT_SECONDS) -> int:
        """A joining process waits (briefly) for the first one to have created the crawl job."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.client.hget(self._keys().state, "job_id")
            if value is not None:
                return int(value)
            if time.monotonic() >= deadline:
                raise DistributedError(
                    f"the distributed crawl of {self.site} has no crawl job after {timeout:g}s"
                )
            time.sleep(0.1)

    def job_id(self) -> int | None:
        value = self.client.hget(self._keys().state, "job_id")
        return int(value) if value is not None else None

    # ------------------------------------------------------------------------- used inside Scrapy's process

    def take_page(self) -> bool:
        """Take one response from the shared page budget; False when it is spent."""
        return int(self.client.incr(self._keys().pages)) <= self._max_pages()

    def budget_spent(self) -> bool:
        return int(self.client.get(self._keys().pages) or 0) >= self._max_pages()

    def set_busy(self) -> None:
        self.client.sadd(self._keys().busy, self.member)

    def set_not_busy(self) -> None:
        self.client.srem(self._keys().busy, self.member)

    def crawl_over(self) -> int:
        """This process is idle: 2 when the page budget is spent, 1 when the frontier is empty and no process
        is busy, else 0 (wait: a busy process may add links)."""
        keys = self._keys()
        return int(
            self._scripts["idle"](
                keys=[keys.busy, keys.alive, keys.requests, keys.pages],
                args=[self.member, self.stale_seconds, self._max_pages()],
            )
        )

    def _beat(self) -> None:
        while not self._stop_beating.wait(HEARTBEAT_SECONDS):
            try:
                self.heartbeat()
            except Exception:  # a missed beat is retried; the crawl goes on
                log.exception("cannot refresh this crawl process's heartbeat in Redis")

    def _stop_heartbeat(self) -> None:
        self._stop_beating.set()
        if self._beating is not None and self._beating is not threading.current_thread():
            self._beating.join(timeout=5)

    def heartbeat(self) -> None:
        keys = self._keys()
        self._scripts["heartbeat"](
            keys=[keys.alive, *keys.run_keys(), CrawlKeys.current_of(self.site)],
            args=[self.member, KEY_TTL_SECONDS],
        )

    # ------------------------------------------------------------------------------------------ the end

    def leave(self, part: CrawlPart) -> bool:
        """Add this process's counts to the run's totals and leave it; True for the last process to leave,
        which finishes the job (:meth:`totals`, then :meth:`remove_keys`)."""
        keys = self._keys()
        self._stop_heartbeat()
        stats = part.stats
        counts: Counter[str] = Counter(
            stored=part.stored,
            unchanged=part.unchanged,
            to_compare=part.to_compare,
            processes=1,
            interrupted=int(part.interrupted),
        )
        failures: list[tuple[str, str]] = []
        if stats is not None:
            counts.update(
                pages_seen=stats.pages_seen,
                pages_with_text=stats.pages_with_text,
                failures=len(stats.failures),
                sink_errors=stats.sink_errors,
            )
            counts.update({f"status:{status}": n for status, n in stats.by_status.items()})
            counts.update({f"counter:{name}": n for name, n in stats.counters.items()})
            failures = list(stats.failures[:MAX_FAILURES_KEPT])
        pipe = self.client.pipeline(transaction=True)
        for name, value in counts.items():
            if value:
                pipe.hincrby(keys.totals, name, value)
        for url, reason in failures:
            pipe.rpush(keys.failures, json.dumps([url, reason], ensure_ascii=False))
        if part.error:
            pipe.rpush(keys.errors, part.error)
        for key in (keys.totals, keys.failures, keys.errors):
            pipe.expire(key, KEY_TTL_SECONDS)
        self._scripts["leave"](
            keys=[keys.members, keys.state, keys.busy, keys.alive], args=[self.member], client=pipe
        )
        return bool(pipe.execute()[-1])

    def totals(self, elapsed_seconds: float) -> tuple[CrawlStats, CrawlPart, list[str]]:
        """The run's totals (all processes): its stats, its store counts, and the errors of failed parts."""
        keys = self._keys()
        raw = {_text(k): int(v) for k, v in self.client.hgetall(keys.totals).items()}
        failures = [tuple(json.loads(_text(item))) for item in self.client.lrange(keys.failures, 0, -1)]
        errors = [_text(item) for item in self.client.lrange(keys.errors, 0, -1)]
        stats = CrawlStats(
            pages_seen=raw.get("pages_seen", 0),
            pages_with_text=raw.get("pages_with_text", 0),
            by_status={int(k.split(":", 1)[1]): v for k, v in sorted(raw.items()) if k.startswith("status:")},
            failures=tuple((str(url), str(reason)) for url, reason in failures),
            elapsed_seconds=elapsed_seconds,
            sink_errors=raw.get("sink_errors", 0),
            finish_reason="shutdown" if raw.get("interrupted") else "finished",
            counters={
                **{k.split(":", 1)[1]: v for k, v in sorted(raw.items()) if k.startswith("counter:")},
                "fptrack/distributed_processes": raw.get("processes", 0),
            },
        )
        part = CrawlPart(
            stats=stats,
            stored=raw.get("stored", 0),
            unchanged=raw.get("unchanged", 0),
            to_compare=raw.get("to_compare", 0),
            interrupted=bool(raw.get("interrupted")),
        )
        return stats, part, errors

    def remove_keys(self) -> None:
        """Delete this run's keys (and the site's pointer to it, if it still points there); nothing else."""
        keys = self._keys()
        self.client.delete(*keys.run_keys())
        self._scripts["forget"](keys=[CrawlKeys.current_of(self.site)], args=[keys.run])

    def close(self) -> None:
        self._stop_heartbeat()
        with contextlib.suppress(Exception):  # closing a connection that is gone
            self.client.close()

    # ------------------------------------------------------------------------------------------ helpers

    def _keys(self) -> CrawlKeys:
        if self.keys is None:
            raise DistributedError("the distributed crawl was not entered")
        return self.keys

    def _max_pages(self) -> int:
        return self.joined.max_pages if self.joined is not None else 0


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def shared_of(settings: Any) -> SharedCrawl | None:
    shared = settings.get(SHARED_SETTING)
    return shared if isinstance(shared, SharedCrawl) else None


def scrapy_redis_settings(shared: SharedCrawl) -> dict[str, Any]:
    """The Scrapy settings that put a crawl's frontier and dupefilter in Redis (scrapy-redis), under the run's
    keys. The queue is kept when a process closes (``SCHEDULER_PERSIST``): the others may still use it; the
    last process to leave removes it."""
    keys = shared._keys()
    return {
        "SCHEDULER": "fptrack.crawler.distributed.SharedScheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_QUEUE_CLASS": "scrapy_redis.queue.PriorityQueue",
        "SCHEDULER_QUEUE_KEY": keys.requests,
        "SCHEDULER_DUPEFILTER_KEY": keys.dupefilter,
        "SCHEDULER_PERSIST": True,
        "SCHEDULER_FLUSH_ON_START": False,
        "SCHEDULER_IDLE_BEFORE_CLOSE": 0,
        "REDIS_URL": shared.url,
        SHARED_SETTING: shared,
    }


def _scheduler_base() -> type:
    from scrapy_redis.scheduler import Scheduler

    base: type = Scheduler
    return base


class SharedScheduler(_scheduler_base()):  # type: ignore[misc]
    """scrapy-redis's scheduler, telling the other processes when this one holds requests (busy) and ending
    the crawl only when the frontier is empty and nobody is busy (or the shared page budget is spent).

    Busy is announced *before* a request is popped, so a process that finds the frontier empty and nobody busy
    knows that no request is in flight anywhere: a popped request's process stays busy until the links of its
    page are in the frontier (Scrapy is idle only then)."""

    shared: SharedCrawl

    @classmethod
    def from_crawler(cls, crawler: Any) -> SharedScheduler:
        from scrapy import signals

        shared = shared_of(crawler.settings)
        if shared is None:
            raise TypeError(
                f"the {SHARED_SETTING} setting must hold a SharedCrawl (run crawls with run_crawl)"
            )
        scheduler: SharedScheduler = super().from_crawler(crawler)
        scheduler.shared = shared
        scheduler.crawler = crawler
        crawler.signals.connect(scheduler.spider_idle, signal=signals.spider_idle)
        return scheduler

    def close(self, reason: str) -> Any:
        try:
            self.shared.set_not_busy()
        except Exception:  # leaving is retried by leave(); stale processes stop counting anyway
            log.exception("cannot tell Redis that this crawl process is done")
        return super().close(reason)

    def has_pending_requests(self) -> bool:
        return not self.shared.budget_spent() and super().has_pending_requests()

    def next_request(self) -> Any:
        if self.shared.budget_spent():
            return None
        was_idle = self.shared.idle
        if was_idle:
            self.shared.set_busy()
        request = super().next_request()
        if request is not None:
            self.shared.idle = False
        elif was_idle:
            self.shared.set_not_busy()
        return request

    def spider_idle(self, spider: Any = None) -> None:
        from scrapy.exceptions import CloseSpider, DontCloseSpider

        self.shared.idle = True
        over = self.shared.crawl_over()
        if over == 2:
            raise CloseSpider("max_pages")
        if over == 0:
            from twisted.internet import reactor

            reactor.callLater(IDLE_POLL_SECONDS, self._look_again)  # type: ignore[arg-type]
            raise DontCloseSpider

    def _look_again(self) -> None:
        """Ask the engine for requests again soon: links another process adds reach this one in a fraction of
        a second, not at the engine's next heartbeat (5 s). Uses the engine's slot, which is not public API:
        without it, the heartbeat still does the job."""
        slot = getattr(getattr(self.crawler, "engine", None), "_slot", None)
        nextcall = getattr(slot, "nextcall", None)
        if nextcall is not None and getattr(slot, "closing", None) is None:
            nextcall.schedule()
