"""Pages whose text is built by scripts: render them in Debian's Chromium (scrapy-playwright), then extract as
usual.

A crawl's ``render_js`` decides which pages a browser renders: ``auto`` (default) renders an HTML page (status
200) whose static main text is shorter than ``FPTRACK_RENDER_MIN_CHARS`` while it carries a ``<script>``;
``yes`` renders every HTML page (a one-line error before the crawl when Chromium is missing); ``no`` never.
Without Chromium, ``auto`` renders nothing and the crawl records why (``CrawlStats.notes``). The rendered DOM
goes through the same :func:`crawler.parse.parse_response` and pipeline as a static page: one page per URL,
counted once against ``max_pages``; a render that fails keeps the static page.

Once :data:`DIRECT_AFTER` of a host's pages needed the browser and they outnumber those that did not, the
host's new pages are requested through the browser at once (:meth:`RenderPlan.direct_meta`); a direct render
that fails is fetched again plainly. The verdict is stored per managed site (:func:`learned_verdict`,
:mod:`jobs.site_crawl`) and read by the next crawl (:mod:`crawler.known`); each page rendered at once still
parses the document the server sent (:func:`take_document`), so a site that stops needing the browser is
unlearned without a request more. Scripts and stylesheets are fetched once per crawl (:class:`ResourceCache`).

The private-address guard holds for the browser: every request it makes goes through
:class:`BrowserRequestGuard`'s route handler, which aborts refused destinations and fetches the others itself,
one checked redirect hop at a time; Chromium's own proxy refuses every connection and its resolver finds no
host, so what is not routed reaches nothing. Images, media and fonts are never fetched. See
docs/monitoring.md.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

from scrapy.crawler import Crawler
from scrapy.http import Request, Response

from fptrack.core.chromium import CHROMIUM_ARGS, chromium_path
from fptrack.core.settings import Settings
from fptrack.crawler.guard import PrivateAddressPolicy, parse_address, resolve_all
from fptrack.crawler.pages import CrawledPage, CrawlError
from fptrack.crawler.parse import ParsedResponse
from fptrack.crawler.wire import WireHTTP11Handler
from fptrack.storage.match_life import UNSETTLED_MARK

__all__ = [
    "DIRECT_AFTER",
    "MAX_REDIRECTS",
    "NEVER_FETCHED",
    "REDIRECT_STATUSES",
    "RENDER_DIRECT",
    "RENDER_META",
    "BrowserOnDemandHandler",
    "BrowserRequestGuard",
    "KeptResource",
    "RenderPlan",
    "ResourceCache",
    "browser_destination",
    "learned_verdict",
    "plan_rendering",
    "playwright_settings",
    "rendered_response",
    "settle_page",
    "take_document",
]

log = logging.getLogger(__name__)

RENDER_META = "fptrack_render"  # request meta: the static page this request renders again (a ParsedResponse)
RENDER_DIRECT = "fptrack_render_direct"  # request meta: rendered at once, without a static fetch before it
DIRECT_AFTER = 2  # pages of a host the browser had to render before its new pages go to the browser at once
_SCRIPT = re.compile(rb"<script\b", re.IGNORECASE)
NEVER_FETCHED = frozenset({"image", "media", "font"})  # resource types a browser rendering text never needs
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
RESOURCES_KEPT = 8 * 1024 * 1024  # bytes of scripts and stylesheets a crawl keeps (ResourceCache)
_WIRE_HEADERS = frozenset({"content-length", "content-encoding", "transfer-encoding", "connection"})
_DOCUMENTS_KEPT = 64  # rendered pages' documents waiting for the spider (BrowserRequestGuard._documents)
MAX_REDIRECTS = 10  # as Scrapy's REDIRECT_MAX_TIMES for the crawl's own requests
_HARMLESS_SCHEMES = frozenset({"data", "blob", "about"})  # never leave the browser


@dataclass(frozen=True)
class RenderPlan:
    """How one crawl renders pages: the mode asked for, the browser found, and why rendering is off if it
    is."""

    mode: str = "no"
    browser: str | None = None
    min_chars: int = 50
    timeout: float = 20.0
    idle_wait: float = 3.0
    pages: int = 2
    user_agent: str = ""
    unavailable: str = ""  # set when ``auto`` found no browser: the crawl's recorded reason

    @property
    def active(self) -> bool:
        return self.mode != "no" and self.browser is not None

    def wants(self, response: Response, page: CrawledPage) -> bool:
        """Whether the static ``page`` parsed from ``response`` is to be rendered by the browser."""
        if not self.active or response.meta.get(RENDER_META) is not None or page.status != 200:
            return False
        if response.meta.get(RENDER_DIRECT):
            return False  # rendered already
        if page.error or not _is_html(response):
            return False  # binary, plain text, undecodable: a browser would not do better
        if self.mode == "yes":
            return True
        return len(page.text) < self.min_chars and _SCRIPT.search(response.body or b"") is not None

    def request(
        self, response: Response, static: ParsedResponse, meta: dict[str, Any], **kwargs: Any
    ) -> Request:
        """The request that renders ``response`` again in the browser (its final URL: redirects were followed,
        and checked, by Scrapy already). ``meta`` carries the spider's own keys; the static page and its links
        ride along as the fallback."""
        return Request(
            response.url,
            dont_filter=True,
            priority=10,  # finish what was started before taking new pages
            meta={**meta, RENDER_META: static, **self.browser_meta()},
            **kwargs,
        )

    def browser_meta(self) -> dict[str, Any]:
        """The request meta that has scrapy-playwright fetch a page in the browser (guarded, settled)."""
        from scrapy_playwright.page import PageMethod

        return {
            "playwright": True,
            "playwright_page_goto_kwargs": {"wait_until": "load"},
            "playwright_context_kwargs": {"user_agent": self.user_agent, "service_workers": "block"},
            "playwright_page_init_callback": "fptrack.crawler.render.guard_page",
            "playwright_page_methods": [PageMethod(settle_page, self.idle_wait)],
        }

    def direct_meta(self) -> dict[str, Any]:
        """The meta of a request rendered at once, without the static fetch first (see the module
        docstring)."""
        return {**self.browser_meta(), RENDER_DIRECT: True}

    def renders_directly(self, rendered: int, static: int, *, learned: bool = False) -> bool:
        """Whether a host's next pages go to the browser at once: every page with ``render_js=yes``; with
        ``auto``, once ``rendered`` of its pages needed the browser (:data:`DIRECT_AFTER` at least) and they
        outnumber the ``static`` ones that did not, or from the start when an earlier crawl ``learned`` so
        (``sites.render_direct``) and this one has not seen otherwise."""
        if not self.active:
            return False
        if self.mode == "yes":
            return True
        if learned:
            return not (static >= DIRECT_AFTER and static > rendered)
        return rendered >= DIRECT_AFTER and rendered > static


def learned_verdict(rendered: int, static: int, before: bool) -> bool:
    """What a site's stored verdict (``sites.render_direct``) becomes after a crawl in which ``rendered`` of
    its pages (listings aside) needed the browser and ``static`` had their text without it: learned as
    :meth:`RenderPlan.renders_directly` learns within a crawl, unlearned by the same margin the other way,
    left as it was by a crawl that saw too few pages to tell (an incremental re-crawl fetching one new
    chapter)."""
    if rendered >= DIRECT_AFTER and rendered > static:
        return True
    if static >= DIRECT_AFTER and static > rendered:
        return False
    return before


def _is_html(response: Response) -> bool:
    content_type = (
        (response.headers.get(b"Content-Type") or b"").decode("latin-1").split(";", 1)[0].strip().lower()
    )
    return content_type in ("", "text/html", "application/xhtml+xml")


def plan_rendering(mode: str, settings: Settings) -> RenderPlan:
    """The :class:`RenderPlan` of a crawl asked to render ``mode`` (``auto`` / ``yes`` / ``no``). Raises
    :class:`CrawlError` (one line) for ``yes`` without Chromium; ``auto`` without it renders nothing and says
    why."""
    if mode not in ("auto", "yes", "no"):
        raise CrawlError(f"render_js must be auto, yes or no, got {mode!r}")
    common = {
        "mode": mode,
        "min_chars": settings.render_min_chars,
        "timeout": settings.render_timeout,
        # a script's requests wait for their turns of the site's pace (storage.pacing) like the pages do: the
        # wait for the page to go quiet allows for three turns at the default rate on top
        "idle_wait": settings.render_idle_wait + 3.0 / settings.site_rate,
        "pages": settings.render_pages,
        "user_agent": settings.user_agent,
    }
    if mode == "no":
        return RenderPlan(**common)  # type: ignore[arg-type]
    browser = chromium_path(settings)
    if browser is None:
        wanted = settings.chromium or "chromium"
        if mode == "yes":
            raise CrawlError(
                f"render_js=yes needs Chromium, and {wanted!r} was not found (install the Debian package "
                "chromium or set FPTRACK_CHROMIUM)"
            )
        reason = (
            f"JS rendering off: {wanted!r} not found "
            f"(install the Debian package chromium or set FPTRACK_CHROMIUM)"
        )
        return RenderPlan(**common, unavailable=reason)  # type: ignore[arg-type]
    try:
        import scrapy_playwright  # noqa: F401
    except ImportError:
        if mode == "yes":
            raise CrawlError(
                "render_js=yes needs the Python package scrapy-playwright (pip install scrapy-playwright)"
            ) from None
        missing = "JS rendering off: the Python package scrapy-playwright is missing"
        return RenderPlan(**common, unavailable=missing)  # type: ignore[arg-type]
    return RenderPlan(**common, browser=browser)  # type: ignore[arg-type]


async def settle_page(page: Any, idle_wait: float) -> None:
    """After the load event, give the page's scripts up to ``idle_wait`` seconds to finish their requests (a
    chapter fetched as JSON arrives after ``load``); a page that never goes quiet (polling ads) is taken as it
    is then."""
    from playwright.async_api import Error as PlaywrightError

    try:
        await page.wait_for_load_state("networkidle", timeout=idle_wait * 1000)
    except PlaywrightError:
        # timed out: its text is what it is now, marked so that a loading placeholder is never taken for a
        # removal (storage.match_life.UNSETTLED_MARK)
        try:
            await page.evaluate(f"document.documentElement.setAttribute('{UNSETTLED_MARK}', '1')")
        except PlaywrightError:
            pass


@dataclass(frozen=True)
class KeptResource:
    """A script's or stylesheet's answer, served again to the next page that asks for it."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


class ResourceCache:
    """The scripts and stylesheets the rendered pages of one crawl (or the re-checks of a process) asked for,
    by URL.

    Routing every request (the private-address guard) turns Chromium's HTTP cache off, so each rendered page
    would fetch its site's shared scripts again: on a script-built site, a request more per chapter for
    nothing. A real browser keeps them; this does for the length of a crawl (or ``max_age`` seconds): answers
    200 and 404/410 to a GET (a missing script stays missing), up to :data:`RESOURCES_KEPT` bytes in all.
    Pages, frames and data (XHR, fetch) are never kept: they are what may change. Safe to share between
    threads."""

    KINDS = frozenset({"script", "stylesheet"})
    STATUSES = frozenset({200, 404, 410})

    def __init__(
        self,
        limit: int | None = None,
        *,
        max_age: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = RESOURCES_KEPT if limit is None else limit
        self.max_age = max_age
        self.clock = clock
        self._kept: dict[str, tuple[KeptResource, float]] = {}
        self._size = 0
        self._lock = threading.Lock()

    def wanted(self, kind: str, method: str, status: int) -> bool:
        return self.keeps(kind, method) and status in self.STATUSES

    def keeps(self, kind: str, method: str) -> bool:
        """Whether requests of this resource type and method are kept at all."""
        return kind in self.KINDS and method == "GET"

    def get(self, kind: str, method: str, url: str) -> KeptResource | None:
        if not self.keeps(kind, method):
            return None
        with self._lock:
            found = self._kept.get(url)
            if found is None:
                return None
            if self.max_age is not None and self.clock() - found[1] > self.max_age:
                del self._kept[url]
                self._size -= len(found[0].body)
                return None
            return found[0]

    def put(self, url: str, status: int, headers: Mapping[str, str], body: bytes) -> None:
        # the body is handed over whole and undecoded: no length or encoding of the wire's
        kept = tuple((k, v) for k, v in headers.items() if k.lower() not in _WIRE_HEADERS)
        with self._lock:
            if url in self._kept or self._size + len(body) > self.limit:
                return
            self._kept[url] = (KeptResource(status, kept, body), self.clock())
            self._size += len(body)


@dataclass
class BrowserRequestGuard:
    """``PLAYWRIGHT_ABORT_REQUEST``: called for every request the browser makes; True aborts it.

    Refuses what :class:`crawler.guard.PrivateAddressGuard` refuses (the same policy, after DNS), and other
    schemes than http(s)/ws(s) that would leave the browser; skips images, media and fonts. Each refusal is
    counted (``fptrack/render/refused_private_address``) and recorded as a failure of the crawl with its
    reason and the page that asked. Shared by reference through Scrapy's settings (which deep-copy their
    values)."""

    policy: PrivateAddressPolicy
    record: Callable[[str, str], None] | None = None  # (url, reason) of each refusal: the crawl's failures
    stats: Any = None  # the crawler's stats, bound when the crawl starts (RenderStats)
    fetch_timeout: float = 20.0
    # blocks until one request may go to the URL's site (the shared pace, storage.pacing); run in a thread
    pace: Callable[[str], None] | None = None
    resources: ResourceCache = field(default_factory=lambda: ResourceCache())
    _resolved: dict[tuple[str, int], list[Any]] = field(default_factory=dict)
    _recorded: set[tuple[str, str]] = field(default_factory=set)
    # the rendered pages' own documents as the server sent them (final URL -> body), until the spider takes
    # them (take_document); bounded, for renders that failed and were never taken
    _documents: dict[str, bytes] = field(default_factory=dict)
    # scripts and stylesheets being fetched (URL -> set once kept): the pages rendered beside wait for them
    _loading: dict[str, asyncio.Event] = field(default_factory=dict)

    def __deepcopy__(self, memo: dict[int, Any]) -> BrowserRequestGuard:
        return self

    async def __call__(self, request: Any) -> bool:
        """``PLAYWRIGHT_ABORT_REQUEST``: True aborts ``request`` (the second layer, see :meth:`route`)."""
        return await self._refused(request)

    async def route(self, route: Any, request: Any) -> None:
        """The page's own route handler (first layer): refused requests are aborted; the others are fetched
        here one hop at a time (``max_redirects=0``), each redirect's destination checked before it is
        fetched, and the final answer handed to the browser. A browser follows redirects without asking the
        route again: left to it, ``/hop.js -> http://10.0.0.5/`` would pass."""
        from playwright.async_api import Error as PlaywrightError

        if await self._refused(request):
            await route.abort("blockedbyclient")
            return
        url, method = request.url, request.method
        # the page itself took its turn as a Scrapy request (crawler.pacing); what it asks for takes its own
        itself = _is_page_itself(request)
        kind = request.resource_type
        keeps = self.resources.keeps(kind, method)
        loading = self._loading.get(url) if keeps else None
        if loading is not None:
            await loading.wait()  # a page rendered beside this one asked first: its answer will be kept
        kept = self.resources.get(kind, method, url)
        if kept is not None:
            self._inc("fptrack/render/cached_resources")
            try:
                await route.fulfill(status=kept.status, headers=dict(kept.headers), body=kept.body)
            except PlaywrightError as error:
                log.debug("browser request %s failed: %s", url, error)
            return
        if not keeps:
            await self._fetch(route, request, url, method, itself=itself)
            return
        loader = self._loading.setdefault(url, asyncio.Event())
        try:
            await self._fetch(route, request, url, method, itself=itself)
        finally:
            if self._loading.get(url) is loader:
                del self._loading[url]
            loader.set()

    async def _fetch(self, route: Any, request: Any, url: str, method: str, *, itself: bool) -> None:
        """Fetch ``request`` for the browser, one checked hop at a time, and fulfil it (see :meth:`route`)."""
        from playwright.async_api import Error as PlaywrightError

        paced = not itself
        try:
            for _ in range(MAX_REDIRECTS + 1):
                if paced and self.pace is not None and urlsplit(url).scheme in ("http", "https"):
                    await asyncio.to_thread(self.pace, url)
                    self._inc("fptrack/render/paced_requests")
                paced = True
                response = await route.fetch(
                    url=url, method=method, max_redirects=0, timeout=self.fetch_timeout * 1000
                )
                location = response.headers.get("location")
                if response.status not in REDIRECT_STATUSES or not location:
                    if itself and response.status == 200:
                        self._keep_document(url, await response.body())
                    elif self.resources.wanted(request.resource_type, method, response.status):
                        body = await response.body()
                        self.resources.put(request.url, response.status, response.headers, body)
                    await route.fulfill(response=response)
                    return
                url = urljoin(url, location)
                if response.status == 303:
                    method = "GET"
                if await self._refused(request, url):
                    await route.abort("blockedbyclient")
                    return
        except PlaywrightError as error:
            log.debug("browser request %s failed: %s", request.url, error)
        await route.abort("failed")  # failed, or more than MAX_REDIRECTS hops

    def _keep_document(self, url: str, body: bytes) -> None:
        while len(self._documents) >= _DOCUMENTS_KEPT:
            self._documents.pop(next(iter(self._documents)))
        self._documents[url] = body

    def take_document(self, url: str) -> bytes | None:
        """The document the browser got for the page at ``url`` (its final URL), once."""
        return self._documents.pop(url, None)

    async def _refused(self, request: Any, url: str | None = None) -> bool:
        """Whether the browser's ``request`` (or the redirect hop ``url`` it led to) must not be fetched."""
        url = url or request.url
        if request.resource_type in NEVER_FETCHED:
            self._inc("fptrack/render/skipped_media")
            return True
        reason = await self.refusal(url)
        if reason is None:
            return False
        self._inc("fptrack/render/refused_private_address")
        asking = _frame_url(request)
        if self.record is not None and (url, asking) not in self._recorded:
            self._recorded.add((url, asking))
            self.record(url, f"{reason} (requested by the browser rendering {asking})" if asking else reason)
        log.warning("browser request refused: %s: %s", url, reason)
        return True

    async def refusal(self, url: str) -> str | None:
        """Why the browser must not fetch ``url``, or None when it may."""
        reason, destination = browser_destination(url, self.policy)
        if destination is None:
            return reason
        if destination not in self._resolved:
            self._resolved[destination] = await asyncio.to_thread(resolve_all, *destination)
        return self.policy.refusal(*destination, self._resolved[destination])

    def _inc(self, key: str) -> None:
        if self.stats is not None:
            self.stats.inc_value(key)


def browser_destination(url: str, policy: PrivateAddressPolicy) -> tuple[str | None, tuple[str, int] | None]:
    """What the guard can say of a request the browser makes before any DNS look-up: ``(reason, None)`` when
    it is decided (``reason`` None: allowed; a harmless scheme, an allowed host, an address literal checked),
    or ``(None, (host, port))`` when the host's addresses must be resolved and handed to
    ``policy.refusal(host, port, addresses)``. The crawl's browser resolves off the event loop, a re-check's
    in line; the rule is this one."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in _HARMLESS_SCHEMES:
        return None, None
    if scheme not in _DEFAULT_PORTS:
        return f"refused by the private-address guard: {scheme}: URLs are never fetched", None
    host = (parts.hostname or "").lower()
    try:
        port = parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:
        return f"refused by the private-address guard: bad port in {url}", None
    if not host or policy.allows_host(host, port):
        return None, None
    literal = parse_address(host)
    if literal is not None:
        return policy.refusal(host, port, [literal]), None
    return None, (host, port)


def _is_page_itself(request: Any) -> bool:
    """Whether the browser's ``request`` loads the rendered page itself (the main frame's navigation)."""
    try:
        return bool(request.is_navigation_request()) and request.frame.parent_frame is None
    except Exception:  # noqa: BLE001 - a service worker's request has no frame
        return False


def _frame_url(request: Any) -> str:
    try:
        return str(request.frame.url)
    except Exception:  # noqa: BLE001 - a service worker's request has no frame
        return ""


_active_guard: BrowserRequestGuard | None = None  # the crawl's guard: one crawl per process (crawler.runner)


class RenderStats:
    """Extension: binds the crawl's :class:`BrowserRequestGuard` to the crawler's stats once the crawler
    exists, and makes it the guard :func:`guard_page` installs on every page."""

    @classmethod
    def from_crawler(cls, crawler: Any) -> RenderStats:
        global _active_guard
        guard = crawler.settings.get("PLAYWRIGHT_ABORT_REQUEST")
        if isinstance(guard, BrowserRequestGuard):
            guard.stats = crawler.stats
            _active_guard = guard
        return cls()


def take_document(url: str) -> bytes | None:
    """The document the crawl's browser got for the page it rendered at ``url`` (its final URL), as the
    server sent it, or None (see :meth:`BrowserRequestGuard.take_document`)."""
    return _active_guard.take_document(url) if _active_guard is not None else None


async def guard_page(page: Any, request: Request) -> None:
    """``playwright_page_init_callback``: route every request of the new page through the crawl's guard. Named
    by its import path in the request's meta, so a request stays serialisable. With no guard bound, the page
    is closed: its rendering fails and the static text is kept, never a page rendered unguarded."""
    if _active_guard is None:
        await page.close()
        raise RuntimeError("no private-address guard bound for the browser; page closed")
    await page.route("**", _active_guard.route)


class LazyBrowserProvider:
    """``PLAYWRIGHT_BROWSER_PROVIDER``: scrapy-playwright's own provider, but Playwright's driver (a Node
    process) is started with the first page to render, not when the crawl starts: in ``auto`` most crawls
    render nothing."""

    def __init__(self, config: Any) -> None:
        from scrapy_playwright.provider import PlaywrightBrowserProvider

        self._provider = PlaywrightBrowserProvider(config)
        self._started = False

    async def start(self) -> None:
        pass  # deferred to launch_browser

    async def _ensure_started(self) -> None:
        if not self._started:
            self._started = True
            await self._provider.start()

    async def launch_browser(self) -> Any:
        await self._ensure_started()
        return await self._provider.launch_browser()

    async def launch_persistent_context(self, context_kwargs: dict[str, Any]) -> Any:
        await self._ensure_started()
        return await self._provider.launch_persistent_context(context_kwargs)

    async def close(self) -> None:
        if self._started:
            await self._provider.close()


class BrowserOnDemandHandler(WireHTTP11Handler):
    """``DOWNLOAD_HANDLERS`` (http, https) of a crawl that may render: Scrapy's own HTTP handler, keeping the
    reason phrase (:mod:`crawler.wire`), for every request, and scrapy-playwright's handler, made with the
    first request that asks for the browser (meta ``playwright``), for those. Importing and setting up
    scrapy-playwright costs 0.15-0.2 s of the crawl's start (``benchmarks/pipeline_throughput.py``), which a
    crawl in ``auto`` whose pages all have static text, most crawls, never repays."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self._browser: Any = None
        self._browser_lock = asyncio.Lock()

    async def download_request(self, request: Request) -> Response:
        if not request.meta.get("playwright"):
            return await super().download_request(request)
        browser = self._browser or await self._start_browser()
        response: Response = await browser.download_request(request)
        return response

    async def _start_browser(self) -> Any:
        async with self._browser_lock:
            if self._browser is None:
                from scrapy_playwright.handler import ScrapyPlaywrightDownloadHandler

                handler = ScrapyPlaywrightDownloadHandler.from_crawler(self.crawler)
                # what scrapy-playwright runs when the engine starts, long past here: its browser provider
                # made (ours, LazyBrowserProvider, starts Playwright's driver with the first page)
                await handler._maybe_launch_in_thread()
                self._browser = handler
        return self._browser

    async def close(self) -> None:
        await super().close()
        if self._browser is not None:
            await self._browser.close()


def playwright_settings(
    plan: RenderPlan,
    policy: PrivateAddressPolicy,
    record: Callable[[str, str], None],
    pace: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The Scrapy settings that route rendering requests (meta ``playwright``) through Chromium; every other
    request keeps Scrapy's own downloader. Empty when the plan renders nothing. scrapy-playwright's handler,
    its driver and the browser are made with the first page that needs them (:class:`BrowserOnDemandHandler`,
    no startup context, :class:`LazyBrowserProvider`), never for a crawl whose pages all have static text."""
    if not plan.active:
        return {}
    handler = "fptrack.crawler.render.BrowserOnDemandHandler"
    return {
        "DOWNLOAD_HANDLERS": {"http": handler, "https": handler},
        "TWISTED_REACTOR": "twisted.internet.asyncioreactor.AsyncioSelectorReactor",
        "PLAYWRIGHT_BROWSER_TYPE": "chromium",
        "PLAYWRIGHT_BROWSER_PROVIDER": "fptrack.crawler.render.LazyBrowserProvider",
        "PLAYWRIGHT_LAUNCH_OPTIONS": {
            "executable_path": plan.browser,
            "headless": True,
            "args": list(CHROMIUM_ARGS),
            "timeout": plan.timeout * 1000,
        },
        # one context, ``pages`` tabs at a time: the bound on the browser's memory and CPU
        "PLAYWRIGHT_MAX_CONTEXTS": 1,
        "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT": plan.pages,
        "PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT": plan.timeout * 1000,
        "PLAYWRIGHT_ABORT_REQUEST": BrowserRequestGuard(
            policy, record=record, fetch_timeout=plan.timeout, pace=pace
        ),
        "PLAYWRIGHT_RESTART_DISCONNECTED_BROWSER": True,
    }


def rendered_response(response: Response) -> Response:
    """The browser's DOM as a UTF-8 page: scrapy-playwright re-encodes ``page.content()`` with the server's
    charset, while the markup may still declare another in ``<meta>``; one declared charset, the right one,
    for :func:`crawler.parse.parse_response`."""
    headers = response.headers.copy()
    headers[b"Content-Type"] = b"text/html; charset=utf-8"
    return response.replace(headers=headers, body=response.text.encode("utf-8"))
