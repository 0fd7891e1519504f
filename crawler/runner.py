"""``run_crawl``: one Scrapy crawl, in this process, from start URLs to a :class:`CrawlStats`.

Once per process: Scrapy runs on Twisted's reactor, which cannot be restarted after it stops. The crawl
service (:func:`jobs.crawls.run_crawl_job`) calls ``run_crawl`` once per process: ``fptrack crawl`` and
``fptrack sites run`` in theirs, a scheduled crawl in a process of its own (:mod:`jobs.site_crawl`); tests run
each crawl in a child.

The Scrapy settings of a crawl are :data:`STATIC_SCRAPY_SETTINGS`, the same for every crawl (the components
and their order), and what :func:`scrapy_settings` derives from fptrack's settings and the crawl's options.
"""

from __future__ import annotations

import copy
import gc
import logging
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from fptrack.core.settings import Settings
from fptrack.crawler import robots
from fptrack.crawler.guard import POLICY_SETTING, PrivateAddressPolicy, proxy_hosts
from fptrack.crawler.images import OcrPlan
from fptrack.crawler.links import request_url, site_of
from fptrack.crawler.pacing import PACE_LIMIT_SETTING, PACER_SETTING
from fptrack.crawler.pages import (
    DOWNLOAD_MAXSIZE_SETTING,
    RENDER_JS_MODES,
    CrawledPage,
    CrawlError,
    CrawlOptions,
    CrawlProgress,
    CrawlStats,
)
from fptrack.crawler.pipelines import HOOKS_SETTING, CrawlHooks
from fptrack.crawler.render import RenderPlan, plan_rendering, playwright_settings
from fptrack.crawler.store import PageStore
from fptrack.fingerprint.containers import ContainerLimits
from fptrack.fingerprint.ocr import OcrLimits
from fptrack.storage.pacing import Pacer

if TYPE_CHECKING:
    from fptrack.crawler.distributed import SharedCrawl
    from fptrack.crawler.resume import CrawlState

__all__ = [
    "PROTECTED_SCRAPY_SETTINGS",
    "STATIC_SCRAPY_SETTINGS",
    "check_options",
    "download_limits",
    "run_crawl",
    "scrapy_settings",
]

# Settings the crawl's correctness and safety rest on: ``-s`` cannot replace them.
PROTECTED_SCRAPY_SETTINGS = frozenset(
    {
        "ITEM_PIPELINES",
        "DOWNLOADER_MIDDLEWARES",
        "TWISTED_DNS_RESOLVER",
        "DNS_RESOLVER",
        "DOWNLOAD_HANDLERS",
        "SPIDER_MIDDLEWARES",
        "EXTENSIONS",
        "EXTENSIONS_BASE",
        "TWISTED_REACTOR",
        "BOT_NAME",
        # a distributed crawl's frontier (crawler.distributed)
        "SCHEDULER",
        "DUPEFILTER_CLASS",
        "SCHEDULER_QUEUE_CLASS",
        "SCHEDULER_QUEUE_KEY",
        "SCHEDULER_DUPEFILTER_KEY",
        "SCHEDULER_PERSIST",
        "SCHEDULER_FLUSH_ON_START",
        "REDIS_URL",
    }
)
_SCRAPY_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")

_ran_in_this_process = False
_lock = threading.Lock()

# After a Ctrl+C or SIGTERM, Scrapy stops gracefully (requests in flight finish, pages parsed so far are
# stored); a crawl still running this many seconds later, or a second signal, stops the reactor at once.
SHUTDOWN_GRACE_SECONDS = 5.0


def download_limits(settings: Settings) -> ContainerLimits:
    """The caps on reading one downloaded file (docs/downloads.md), from the settings."""
    return ContainerLimits(
        max_unpacked_bytes=settings.download_max_unpacked_bytes,
        max_member_bytes=settings.download_max_member_bytes,
        max_ratio=settings.download_max_ratio,
        max_members=settings.download_max_members,
        max_depth=settings.download_max_depth,
        max_seconds=settings.download_max_seconds,
        ocr=ocr_plan(settings).limits if ocr_plan(settings).active else None,  # scanned PDFs
    )


def ocr_plan(settings: Settings) -> OcrPlan:
    """Which pages have their chapter images read, and the caps on reading them (docs/downloads.md)."""
    limits = OcrLimits(
        languages=settings.ocr_languages,
        max_seconds=settings.ocr_max_seconds,
        max_chars=settings.ocr_max_chars,
    )
    return OcrPlan(min_chars=settings.ocr_min_chars, max_images=settings.ocr_max_images, limits=limits)


def check_options(options: CrawlOptions) -> None:
    """Raise :class:`CrawlError` (one line, naming the culprit) for options a crawl cannot run with."""
    for kind, patterns in (("include", options.include), ("exclude", options.exclude)):
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as error:
                raise CrawlError(f"{kind} pattern {pattern!r} is not a regular expression: {error}") from None
    if options.delay is not None and options.delay < 0:
        raise CrawlError(f"delay must be >= 0 seconds, got {options.delay:g}")
    if options.concurrency is not None and options.concurrency < 1:
        raise CrawlError(f"concurrency must be >= 1, got {options.concurrency}")
    if options.render_js not in RENDER_JS_MODES:
        raise CrawlError(f"render_js must be auto, yes or no, got {options.render_js!r}")
    for name, _ in options.scrapy_settings:
        if not _SCRAPY_NAME.match(name):
            raise CrawlError(
                f"-s {name}: expected a Scrapy setting name in capitals (e.g. -s DOWNLOAD_DELAY=2)"
            )
        # PLAYWRIGHT_*: the browser's guard, its launch options (off the network) and its bounds
        # (crawler.render)
        if name in PROTECTED_SCRAPY_SETTINGS or name.startswith(("FPTRACK_", "PLAYWRIGHT_")):
            raise CrawlError(f"-s {name}: fptrack's own setting, it cannot be overridden")
    try:
        PrivateAddressPolicy.from_entries(options.allow_private_hosts)
    except ValueError as error:
        raise CrawlError(f"--allow-private-host: {error}") from None


def _scrapy_extensions_base() -> dict[str, int]:
    from scrapy.settings import default_settings

    off = ("scrapy.extensions.remote_control.", "scrapy.extensions.telnet.")
    return {name: at for name, at in default_settings.EXTENSIONS_BASE.items() if not name.startswith(off)}


STATIC_SCRAPY_SETTINGS: Mapping[str, Any] = MappingProxyType(
    {
        "BOT_NAME": "fptrack",
        "ROBOTSTXT_USER_AGENT": robots.USER_AGENT,
        "ROBOTSTXT_PARSER": "fptrack.crawler.robots.ScrapyRobotParser",
        "TWISTED_DNS_RESOLVER": "fptrack.crawler.guard.GuardedResolver",
        "DOWNLOAD_WARNSIZE": 0,
        "RETRY_TIMES": 1,
        # 429 (and a 503 with Retry-After) is the pacer's: the site is held and the request tried again after
        # the window, as often as it takes (crawler.pacing)
        "RETRY_HTTP_CODES": [502, 503, 504, 408],
        "REDIRECT_MAX_TIMES": 10,
        # Breadth first, so a max_pages budget is spent on the shallowest pages.
        "DEPTH_LIMIT": 0,
        "DEPTH_PRIORITY": 1,
        "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
        "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
        # Every request (redirects and robots.txt included) passes the site scope, then the private-address
        # guard, before robots.txt is fetched and before any connection.
        "DOWNLOADER_MIDDLEWARES": {
            "fptrack.crawler.middlewares.StayOnStartSites": 50,
            "fptrack.crawler.guard.PrivateAddressGuard": 60,
            # process_response runs from the highest number down: it sees a 3xx before RedirectMiddleware
            # (600)
            "fptrack.crawler.middlewares.RefuseRedirectLoops": 650,
            "fptrack.crawler.conditional.ConditionalRequests": 70,
            # the shared pace per site: after the guards (and robots.txt, 100) have allowed a request, just
            # before Scrapy's download slot; it sees a response before RetryMiddleware (550), so it alone
            # answers a 429
            "fptrack.crawler.pacing.PaceRequests": 560,
            # keeps the payload as received (coding kept) and the reason phrase for the evidence: it sees a
            # response before HttpCompressionMiddleware (590) decodes it (crawler.wire)
            "fptrack.crawler.wire.KeepWirePayload": 595,
        },
        # Scrapy's HTTP/1.1 handler keeping each status line's reason phrase (crawler.wire); a crawl that may
        # render has crawler.render's, which extends it
        "DOWNLOAD_HANDLERS": {
            "http": "fptrack.crawler.wire.WireHTTP11Handler",
            "https": "fptrack.crawler.wire.WireHTTP11Handler",
        },
        # Scrapy's own extensions but its remote control and telnet console, both off (below): a class named
        # in EXTENSIONS is imported even when mapped to None, and the remote control's brings aiohttp (0.4 s
        # of every crawl's start-up)
        "EXTENSIONS_BASE": _scrapy_extensions_base(),
        "EXTENSIONS": {
            "fptrack.crawler.middlewares.SkipBinaryBodies": 100,
            "fptrack.crawler.render.RenderStats": 110,
        },
        "ITEM_PIPELINES": {
            "fptrack.crawler.pipelines.RecordPipeline": 100,
            "fptrack.crawler.pipelines.PersistPipeline": 200,
            "fptrack.crawler.pipelines.SinkPipeline": 250,
            "fptrack.crawler.pipelines.ProgressPipeline": 300,
        },
        "TELNETCONSOLE_ENABLED": False,
        # Scrapy starts this many asyncio tasks for every response's output, whatever it holds (default 100:
        # ~200 task and queue operations a page, a tenth of the reactor thread's time in a 1,000-page
        # crawl's profile); a page yields one item and its links
        "CONCURRENT_ITEMS": 16,
        # Scrapy >= 2.19 starts an HTTP server in every crawl that runs Python code sent to it (for its MCP
        # tooling), and imports aiohttp for it (0.4 s of start-up): a crawl of hostile sites runs neither
        "REMOTE_CONTROL_ENABLED": False,
        "LOG_LEVEL": "WARNING",
        "STATS_DUMP": False,
        "COOKIES_ENABLED": True,
    }
)
"""The Scrapy settings every fptrack crawl has, whatever its settings and options: the components in their
order, breadth-first scheduling, retries and redirects, quiet logs. :func:`scrapy_settings` adds what depends
on them."""


def scrapy_settings(
    settings: Settings,
    *,
    hooks: CrawlHooks,
    options: CrawlOptions | None = None,
    shared: SharedCrawl | None = None,
    render: RenderPlan | None = None,
    pacer: Pacer | None = None,
) -> dict[str, Any]:
    """The Scrapy settings of an fptrack crawl: :data:`STATIC_SCRAPY_SETTINGS` and what derives from fptrack's
    :class:`Settings` and the crawl's :class:`CrawlOptions` (per-site politeness, private hosts allowed,
    ``-s`` settings passed through, applied last); with ``shared``, the frontier and dupefilter of a
    distributed crawl in Redis (:mod:`crawler.distributed`); when it renders pages built by scripts, its
    :class:`crawler.render.RenderPlan`. ``pacer`` is the shared pace per site (:mod:`storage.pacing`); None:
    one kept in this process."""
    options = options or CrawlOptions()
    per_site = options.concurrency or settings.crawl_concurrency_per_site
    delay = settings.crawl_delay if options.delay is None else options.delay
    obey_robots = settings.crawl_obey_robots if options.obey_robots is None else options.obey_robots
    policy = PrivateAddressPolicy.from_entries(
        (*settings.allow_private_hosts, *options.allow_private_hosts), proxies=proxy_hosts()
    )
    # the crawl's own: Scrapy may change what it is given
    values = copy.deepcopy(dict(STATIC_SCRAPY_SETTINGS))
    values.update(
        {
            "USER_AGENT": settings.user_agent,
            "ROBOTSTXT_OBEY": obey_robots,
            # a process whose entry point configured logging (the command line's -v/-q) keeps its handler
            # alone: Scrapy's own would print every line twice
            "LOG_INSTALL_ROOT_HANDLER": not logging.root.handlers,
            "CONCURRENT_REQUESTS": max(settings.crawl_concurrency, per_site),
            "CONCURRENT_REQUESTS_PER_DOMAIN": per_site,
            # Polite by default: every request takes a turn of the site's shared pace (crawler.pacing), at
            # most FPTRACK_SITE_RATE (or the site's rate) requests a second, and 1 / delay when a delay is
            # set: the stricter wins. Scrapy's own delay is left at 0, so that the two do not add up.
            PACER_SETTING: pacer if pacer is not None else Pacer(None, settings),
            PACE_LIMIT_SETTING: 1.0 / delay if delay > 0 else 0.0,
            "DOWNLOAD_DELAY": 0.0,
            # AutoThrottle only slows down further as a site answers slower (``per_site`` requests in flight
            # per site); it starts at no delay, so that it never holds back what the pace allows.
            "AUTOTHROTTLE_ENABLED": settings.crawl_autothrottle,
            "AUTOTHROTTLE_START_DELAY": 0.0,
            "AUTOTHROTTLE_MAX_DELAY": 30.0,
            "AUTOTHROTTLE_TARGET_CONCURRENCY": float(per_site),
            POLICY_SETTING: policy,
            "DOWNLOAD_TIMEOUT": settings.crawl_timeout,
            "DOWNLOAD_MAXSIZE": settings.crawl_max_body_bytes,
            DOWNLOAD_MAXSIZE_SETTING: settings.download_max_bytes,  # a downloaded file's (middlewares)
            HOOKS_SETTING: hooks,
        }
    )
    if shared is not None:
        from fptrack.crawler.distributed import scrapy_redis_settings

        values.update(scrapy_redis_settings(shared))
    if render is not None:
        pace = values[PACER_SETTING]
        limit = values[PACE_LIMIT_SETTING] or None

        def browser_turn(url: str) -> None:  # the browser's own requests keep the site's pace too
            pace.wait_turn(site_of(url), limit)

        record = hooks.ledger.record_failure
        values.update(playwright_settings(render, policy, record=record, pace=browser_turn))
    values.update(dict(options.scrapy_settings))
    return values


def run_crawl(
    start_urls: Sequence[str],
    *,
    settings: Settings,
    depth: int = 2,
    max_pages: int = 100,
    sink: Callable[[CrawledPage], None] | None = None,
    store: PageStore | None = None,
    progress: Callable[[CrawlProgress], None] | None = None,
    options: CrawlOptions | None = None,
    shared: SharedCrawl | None = None,
    state: CrawlState | None = None,
    pacer: Pacer | None = None,
) -> CrawlStats:
    """Crawl from ``start_urls`` and return when done; every response goes to ``store`` (batched writes, see
    :mod:`crawler.store`) or, synchronously, to ``sink``.

    Start pages are depth 0; links (``<a href>``) are followed to ``depth`` on the start URLs' sites (host and
    port) only, plus the site a start URL redirects to within its registrable domain (``example.com`` ->
    ``www.example.com``); at most ``max_pages`` responses are handed to ``sink``. Requests that get no
    response (refused, timed out, DNS, redirect loops, bodies over the size cap) are listed in
    ``CrawlStats.failures`` with a readable reason. A first SIGINT/SIGTERM stops the crawl gracefully, forced
    after :data:`SHUTDOWN_GRACE_SECONDS`; the stats then say ``interrupted``.

    ``options`` (:class:`CrawlOptions`) adds sites, link patterns, per-site politeness, private hosts allowed
    and Scrapy settings. Every destination passes :mod:`crawler.guard` (no private, loopback, link-local...
    address unless allowed); refusals are failures with their reason.

    ``shared`` (an entered :class:`crawler.distributed.SharedCrawl`) makes this process one of a distributed
    crawl's: the frontier, the dupefilter and the ``max_pages`` budget are shared in Redis, and only the run's
    first process requests the start URLs. ``state`` (:class:`crawler.resume.CrawlState`, a site crawl) keeps
    the frontier on disk, and continues the one an interrupted crawl left.

    Runs Scrapy on Twisted's reactor in this thread, so it works **once per process**; a second call raises
    :class:`CrawlError`. Raises :class:`CrawlError` for bad arguments before anything is fetched.
    """
    options = options or CrawlOptions()
    check_options(options)
    # render_js=yes without Chromium: a one-line error here
    render = plan_rendering(options.render_js, settings)
    urls = _checked_start(start_urls, depth, max_pages)
    _take_the_reactor()

    from scrapy.crawler import CrawlerProcess

    from fptrack.crawler.spiders import PageSpider

    if (sink is None) == (store is None):
        raise CrawlError("run_crawl needs exactly one of sink= and store=")
    hooks = CrawlHooks(sink=sink, progress=progress, max_pages=max_pages, store=store)
    if render.unavailable:
        hooks.ledger.notes.append(render.unavailable)
        logging.getLogger(__name__).warning(
            "%s; pages built by scripts keep their static text", render.unavailable
        )
    process = CrawlerProcess(
        scrapy_settings(settings, hooks=hooks, options=options, shared=shared, render=render, pacer=pacer)
    )
    _quiet_repeated_failures()
    _scrapy_logs_at_printed_level()
    started = time.monotonic()
    process.crawl(
        PageSpider,
        start_urls=urls,
        depth=depth,
        max_pages=max_pages,
        extra_sites=[request_site(host) for host in options.allowed_hosts],
        include=options.include,
        exclude=options.exclude,
        max_links=settings.crawl_max_links,
        max_chars=settings.max_page_chars,
        max_bytes=settings.crawl_max_body_bytes,
        file_limits=download_limits(settings),
        max_file_chars=settings.download_max_chars,
        take_page=shared.take_page if shared is not None else None,
        seed=shared is None or shared.first,
        render=render,
        state=state,
        ocr=ocr_plan(settings),
    )
    # What start-up made (modules, Scrapy's and the job's objects) lives as long as the process: frozen out of
    # the collector's reach, so that a full collection during the crawl does not walk it again each time.
    gc.freeze()
    with _stop_on_signals(process) as stopped:
        process.start(install_signal_handlers=False)
    if stopped:  # the spider may not have closed (forced stop): the crawl was interrupted all the same
        hooks.ledger.finish_reason = "shutdown"
    return _stats_of(hooks, elapsed=time.monotonic() - started)


def _checked_start(start_urls: Sequence[str], depth: int, max_pages: int) -> list[str]:
    """The start URLs as requested (deduplicated, in order); :class:`CrawlError` for bad start arguments."""
    urls = list(dict.fromkeys(request_url(url) for url in _as_url_list(start_urls)))
    if not urls:
        raise CrawlError("no start URLs given")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise CrawlError(f"depth must be an integer >= 0, got {depth!r}")
    if isinstance(max_pages, bool) or not isinstance(max_pages, int) or max_pages < 1:
        raise CrawlError(f"max_pages must be an integer >= 1, got {max_pages!r}")
    return urls


def _take_the_reactor() -> None:
    """Twisted's reactor runs once per process: the first crawl takes it, a second one is a
    :class:`CrawlError`."""
    global _ran_in_this_process
    with _lock:
        if _ran_in_this_process:
            raise CrawlError(
                "run_crawl runs once per process (Twisted's reactor cannot restart); start a new process"
            )
        _ran_in_this_process = True


def _quiet_repeated_failures() -> None:
    # Each failed request is reported once, in CrawlStats.failures; the retry middleware's own
    # "Gave up retrying" ERROR line would only repeat it on the user's terminal.
    logging.getLogger("scrapy.downloadermiddlewares.retry").setLevel(logging.CRITICAL)
    # A robots.txt that cannot be fetched (refused, timed out) leaves the page to fail on its own, with its
    # reason.
    logging.getLogger("scrapy.downloadermiddlewares.robotstxt").setLevel(logging.CRITICAL)


def _scrapy_logs_at_printed_level(handlers: Sequence[logging.Handler] | None = None) -> None:
    """Scrapy's logger at the lowest level a handler of the root prints, instead of the DEBUG its logging
    set-up gives it: with DEBUG, each request and each item makes a record ("Crawled (200)", "Scraped from")
    that every handler then drops (2.4 % of the reactor thread's samples in a 1,000-page crawl). A handler
    without a level (a test's capture) keeps DEBUG. ``handlers``: the root's by default."""
    levels = [handler.level for handler in (logging.root.handlers if handlers is None else handlers)]
    printed = min(levels) if levels else logging.WARNING
    if printed > logging.DEBUG:
        logging.getLogger("scrapy").setLevel(printed)


def _stats_of(hooks: CrawlHooks, *, elapsed: float) -> CrawlStats:
    """What the crawl's pipelines recorded (its ledger), as the :class:`CrawlStats` it returns."""
    ledger = hooks.ledger
    return CrawlStats(
        pages_seen=ledger.pages_seen,
        pages_with_text=ledger.pages_with_text,
        by_status=dict(sorted(ledger.by_status.items())),
        failures=tuple(ledger.failures),
        elapsed_seconds=elapsed,
        sink_errors=ledger.sink_errors,
        finish_reason=ledger.finish_reason,
        counters=dict(ledger.counters),
        notes=tuple(ledger.notes),
    )


@contextmanager
def _stop_on_signals(process: Any) -> Iterator[list[int]]:
    """While the crawl runs: the first SIGINT/SIGTERM stops it gracefully, and stops the reactor outright
    :data:`SHUTDOWN_GRACE_SECONDS` later if it is still running (a download dripping bytes, a page still being
    parsed); a second signal stops it at once. Yields the list of signals received; the previous handlers come
    back afterwards (the crawl service's own, which records an interrupted job). Only in the main thread:
    elsewhere signals cannot be handled and the caller stops the crawl."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    from twisted.internet import reactor as installed

    reactor: Any = installed  # the installed reactor (its interfaces are not declared on the module)

    def force() -> None:
        if reactor.running:
            reactor.stop()

    def graceful() -> None:
        logging.getLogger(__name__).warning(
            "stopping the crawl (signal received); send it again to stop at once"
        )
        process.stop()
        reactor.callLater(SHUTDOWN_GRACE_SECONDS, force)

    def handle(signum: int, frame: Any) -> None:
        received.append(signum)
        reactor.callFromThread(graceful if len(received) == 1 else force)

    previous = {signum: signal.signal(signum, handle) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def request_site(host: str) -> str:
    """A site key (see :func:`storage.sites.site_of`) from ``host``, ``host:port`` or a URL."""
    from fptrack.storage.sites import site_of

    text = host.strip()
    key = site_of(text if "://" in text else f"http://{text}")
    if not key:
        raise CrawlError(f"allowed host {host!r} is not a host name (e.g. www.example.org or 127.0.0.1:8000)")
    return key


def _as_url_list(start_urls: Sequence[str]) -> list[str]:
    if isinstance(start_urls, str):
        return [start_urls]
    for url in start_urls:
        if not isinstance(url, str):
            raise CrawlError(f"start URLs must be strings, got {url!r}")
    return list(start_urls)
