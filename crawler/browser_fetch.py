"""Rendering one page in Chromium outside Scrapy, synchronously: the takedown re-check's way of reading a page
built by scripts as the crawl read it.

A crawl renders through scrapy-playwright (:mod:`crawler.render`), inside Scrapy's reactor. A re-check runs in
a Celery task or a CLI command, fetches a page with :class:`crawler.guarded_http.GuardedFetcher`, and when the
crawl's own rule (:meth:`crawler.render.RenderPlan.wants`) says the page needs a browser, hands it to
:class:`PageRenderer`. Judged on the static HTML alone, a page that fills its chapter by script would look
empty, and a copy still up would be recorded as taken down.

The browser is held to what the crawl's browser is held to:

- Chromium is Debian's (:func:`core.chromium.chromium_path`), started with the crawl's arguments
  (:data:`core.chromium.CHROMIUM_ARGS`: a proxy that refuses every connection, a resolver that finds no
  host), so nothing it does on its own reaches the network;
- every request of the page goes through one route handler, which refuses what the private-address guard
  refuses (the same :class:`crawler.guard.PrivateAddressPolicy`, after DNS), never fetches images, media or
  fonts, and fetches the rest itself one redirect hop at a time, each hop checked again;
- each request waits for its turn at the site it goes to (``wait_turn``, the shared per-site pace of
  :mod:`storage.pacing` when the caller has one), so rendering adds no burst to the site's rate;
- the page's own document is not downloaded twice: the answer the static fetch already got fulfils the
  browser's navigation, and a script or stylesheet is fetched once per :data:`RESOURCES_FOR` seconds by
  the process (:class:`crawler.render.ResourceCache`: routed, the browser keeps no HTTP cache of its own;
  a worker process re-checks a site's pages every few minutes, a run at a time, and a site's pages share
  their scripts).

The page is taken once its load event fired and its network went quiet (``FPTRACK_RENDER_IDLE_WAIT``,
within ``FPTRACK_RENDER_TIMEOUT``), as the crawl takes it. A render that cannot be done (no Chromium, no
Playwright, a crash, a timeout) raises :class:`RenderFailure`; the caller records "could not tell", never a
removal.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self
from urllib.parse import urljoin, urlsplit

from fptrack.core.chromium import CHROMIUM_ARGS, chromium_path
from fptrack.core.settings import Settings
from fptrack.crawler.guard import PrivateAddressPolicy, resolve_all
from fptrack.crawler.render import (
    MAX_REDIRECTS,
    NEVER_FETCHED,
    REDIRECT_STATUSES,
    ResourceCache,
    browser_destination,
)
from fptrack.storage.sites import site_of

__all__ = ["RESOURCES_FOR", "Document", "PageRenderer", "RenderFailure", "RenderedPage"]

log = logging.getLogger(__name__)

# answers to a sub-request that say the site could not serve it now (as opposed to a 404, which a page may
# well meet for a stale script and still show its text): a page left empty after one of them is not judged
_UNKNOWN_STATUSES = frozenset({403, 408, 425, 429})
RESOURCES_FOR = 600.0  # seconds a script or stylesheet is served again without asking the site
_RESOURCES = ResourceCache(max_age=RESOURCES_FOR)
# headers of the static answer handed back to the browser: the body is given whole and undecoded
_KEPT_HEADERS = frozenset({"content-type", "content-language", "last-modified", "etag"})


class RenderFailure(Exception):
    """The page could not be rendered; ``str()`` is the one-line reason recorded with the check."""


@dataclass(frozen=True)
class Document:
    """A page's answer as the static fetch got it (after redirects): served to the browser's navigation
    instead of a second download."""

    url: str  # the final URL
    status: int
    headers: Mapping[str, str]  # lower-case names
    body: bytes


@dataclass(frozen=True)
class RenderedPage:
    """The DOM of a rendered page, and what went wrong on the way."""

    url: str
    html: str
    # the page's sub-requests that were refused, failed or answered 5xx/403/429 ("url: reason"): a page left
    # without text after one of them may have been cut off, not emptied by its site
    failed: tuple[str, ...] = ()
    # False: its network never went quiet within FPTRACK_RENDER_IDLE_WAIT (a script still fetching, perhaps
    # waiting for the site's pace): a loading placeholder may stand where the chapter would be
    settled: bool = True


@dataclass
class _Route:
    """The route handler of one page: the guard, the pace, and the static document."""

    policy: PrivateAddressPolicy
    timeout: float
    wait_turn: Callable[[str], None] | None
    document: Document | None
    resources: ResourceCache = field(default_factory=ResourceCache)
    failed: list[str] = field(default_factory=list)
    served: bool = False
    resolved: dict[tuple[str, int], list[Any]] = field(default_factory=dict)

    def __call__(self, route: Any, request: Any) -> None:
        from playwright.sync_api import Error as PlaywrightError

        if request.resource_type in NEVER_FETCHED:
            route.abort("blockedbyclient")
            return
        document = self.document
        if (
            document is not None
            and not self.served
            and request.is_navigation_request()
            and _same_url(request.url, document.url)
        ):
            self.served = True
            headers = {k: v for k, v in document.headers.items() if k.lower() in _KEPT_HEADERS}
            route.fulfill(status=document.status, headers=headers, body=document.body)
            return
        url, method = request.url, request.method
        reason = self.refusal(url)
        if reason is not None:
            self._refuse(route, url, reason)
            return
        kind = request.resource_type
        kept = self.resources.get(kind, method, url)
        if kept is not None:
            try:
                route.fulfill(status=kept.status, headers=dict(kept.headers), body=kept.body)
            except PlaywrightError:
                pass  # the page went away meanwhile
            return
        try:
            for _ in range(MAX_REDIRECTS + 1):
                if self.wait_turn is not None and urlsplit(url).scheme.lower() in ("http", "https"):
                    self.wait_turn(site_of(url))
                response = route.fetch(url=url, method=method, max_redirects=0, timeout=self.timeout * 1000)
                location = response.headers.get("location")
                if response.status not in REDIRECT_STATUSES or not location:
                    if response.status >= 500 or response.status in _UNKNOWN_STATUSES:
                        self.failed.append(f"{url}: HTTP {response.status}")
                    elif self.resources.wanted(kind, method, response.status):
                        self.resources.put(request.url, response.status, response.headers, response.body())
                    route.fulfill(response=response)
                    return
                url = urljoin(url, location)
                if response.status == 303:
                    method = "GET"
                reason = self.refusal(url)
                if reason is not None:
                    self._refuse(route, url, reason)
                    return
            self.failed.append(f"{request.url}: more than {MAX_REDIRECTS} redirects")
        except PlaywrightError as error:
            self.failed.append(f"{url}: {str(error).splitlines()[0] if str(error) else type(error).__name__}")
        except Exception as error:  # noqa: BLE001 - the pace's database, the resolver: the page is not judged
            self.failed.append(f"{url}: {type(error).__name__}: {error}")
        try:
            route.abort("failed")
        except PlaywrightError:
            pass  # the page went away meanwhile

    def _refuse(self, route: Any, url: str, reason: str) -> None:
        log.warning("browser request refused: %s: %s", url, reason)
        self.failed.append(f"{url}: {reason}")
        route.abort("blockedbyclient")

    def refusal(self, url: str) -> str | None:
        """Why the browser must not fetch ``url`` (as :meth:`crawler.render.BrowserRequestGuard.refusal`
        decides for the crawl's browser), or None when it may."""
        reason, destination = browser_destination(url, self.policy)
        if destination is None:
            return reason
        if destination not in self.resolved:
            self.resolved[destination] = resolve_all(*destination)
        return self.policy.refusal(*destination, self.resolved[destination])


def _same_url(a: str, b: str) -> bool:
    """Whether two URLs name one document (Chromium writes ``http://h`` as ``http://h/``; a fragment is not
    sent)."""

    def norm(url: str) -> tuple[str, str, str, str]:
        parts = urlsplit(url)
        return parts.scheme.lower(), parts.netloc.lower(), parts.path or "/", parts.query

    return norm(a) == norm(b)


class PageRenderer:
    """Renders pages one at a time in one Chromium, started with the first page and closed by :meth:`close`
    (or the ``with`` block): a re-check run that renders nothing starts no browser.

    ``wait_turn(site_key)`` is called before every request the browser sends (the shared pace)."""

    def __init__(
        self,
        settings: Settings,
        policy: PrivateAddressPolicy,
        *,
        wait_turn: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.policy = policy
        self.wait_turn = wait_turn
        self.resources = _RESOURCES  # the process's scripts and stylesheets, shared by every page
        self._playwright: Any = None
        self._browser: Any = None
        self._broken = ""  # why the browser cannot be had, once known: not retried for every page

    @property
    def available(self) -> str:
        """'' when pages can be rendered (as far as is known before trying), else why not."""
        if self._broken:
            return self._broken
        if chromium_path(self.settings) is None:
            wanted = self.settings.chromium or "chromium"
            return f"{wanted!r} not found (install the Debian package chromium or set FPTRACK_CHROMIUM)"
        return ""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def _start(self) -> Any:
        if self._browser is not None:
            return self._browser
        missing = self.available
        if missing:
            raise RenderFailure(f"could not render the page: {missing}")
        try:
            from playwright.sync_api import sync_playwright
        except ImportError:
            self._broken = "the Python package playwright is missing"
            raise RenderFailure(f"could not render the page: {self._broken}") from None
        try:
            self._playwright = sync_playwright().start()
            self._browser = self._playwright.chromium.launch(
                executable_path=chromium_path(self.settings),
                headless=True,
                args=list(CHROMIUM_ARGS),
                timeout=self.settings.render_timeout * 1000,
            )
        except Exception as error:  # noqa: BLE001 - Playwright's errors, or its use inside an event loop
            self._broken = f"Chromium did not start: {_first_line(error)}"
            self.close()
            raise RenderFailure(f"could not render the page: {self._broken}") from None
        return self._browser

    def render(self, url: str, *, document: Document | None = None) -> RenderedPage:
        """The DOM of ``url`` once its scripts ran (its own answer taken from ``document`` when given);
        :class:`RenderFailure` when there is none to judge."""
        browser = self._start()
        handler = _Route(self.policy, self.settings.render_timeout, self.wait_turn, document, self.resources)
        context = None
        try:
            context = browser.new_context(user_agent=self.settings.user_agent, service_workers="block")
            page = context.new_page()
            page.route("**", handler)
            page.goto(url, wait_until="load", timeout=self.settings.render_timeout * 1000)
            settled = True
            try:
                # a script's requests wait for their turns of the site's pace: three turns allowed on top
                idle_wait = self.settings.render_idle_wait + 3.0 / self.settings.site_rate
                page.wait_for_load_state("networkidle", timeout=idle_wait * 1000)
            except Exception as error:  # noqa: BLE001 - never quiet (polling ads): its text is what it is now
                log.debug("%s never went quiet: %s", url, _first_line(error))
                settled = False
            html = str(page.content())
            final = str(page.url)
        except Exception as error:  # noqa: BLE001 - a timeout, a crash, a refused document
            raise RenderFailure(f"could not render the page: {_first_line(error)}") from None
        finally:
            if context is not None:
                try:
                    context.close()
                except Exception:  # noqa: BLE001 - the browser died: the next page starts another
                    self.close()
        return RenderedPage(url=final, html=html, failed=tuple(handler.failed), settled=settled)

    def close(self) -> None:
        browser, playwright = self._browser, self._playwright
        self._browser = self._playwright = None
        for stop in (browser.close if browser else None, playwright.stop if playwright else None):
            if stop is None:
                continue
            try:
                stop()
            except Exception as error:  # noqa: BLE001 - closing what already died
                log.debug("closing the re-check browser: %s", error)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
