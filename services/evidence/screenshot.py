"""A picture of the captured page for people who cannot read a WARC: the stored response shown in Chromium,
off the network, as a full-page PNG.

What is shown is the capture, never the page as it is now: the browser is handed the bytes fptrack kept
(the DOM Chromium rendered when the page was rendered at capture, else the response body as decoded), at the
page's own URL, and every other request (stylesheets, images, scripts, fonts) is refused, so the picture is
the kept HTML with the browser's default styles. Scripts do not run (a rendered DOM already holds what they
did). Chromium is Debian's (``FPTRACK_CHROMIUM``, else ``chromium`` on the PATH), driven by Playwright as
the crawler drives it, with no proxy and no resolver that could reach a host."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from fptrack.core.chromium import CHROMIUM_ARGS, chromium_path
from fptrack.core.settings import Settings
from fptrack.storage.exchanges import RawExchange

__all__ = ["SCREENSHOT_WIDTH", "Screenshot", "one_browser", "screenshot_of"]

SCREENSHOT_WIDTH = 1280  # CSS pixels: a desktop browser's window
MAX_HEIGHT = 16000  # CSS pixels: Chromium's largest bitmap side; a longer page is cut there (and says so)
TIMEOUT_SECONDS = 60.0

# a browser kept open by :func:`one_browser` for the screenshots taken inside it
_shared_browser: ContextVar[Any | None] = ContextVar("fptrack_screenshot_browser", default=None)


@dataclass(frozen=True)
class Screenshot:
    """``png`` the picture (None when none could be taken, ``note`` then says why); ``source`` which kept
    bytes it shows; ``cut`` whether the page was longer than :data:`MAX_HEIGHT`."""

    png: bytes | None
    source: str
    note: str = ""
    cut: bool = False


def _content_type(exchange: RawExchange) -> str:
    for line in exchange.response_head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-type":
            return value.strip().decode("latin-1")
    return "text/html"


def screenshot_of(exchange: RawExchange, settings: Settings) -> Screenshot:
    """The full-page PNG of ``exchange`` as kept (see the module docstring); never raises for a browser that
    is missing or fails: the :class:`Screenshot` then has no picture and a note saying why."""
    if exchange.rendered:
        html, content_type, source = exchange.rendered, "text/html; charset=utf-8", "the rendered DOM kept"
    elif exchange.body is not None:
        html, content_type, source = exchange.body, _content_type(exchange), "the response body kept"
    else:
        return Screenshot(None, "", "no page body was kept")
    chromium = chromium_path(settings)
    if chromium is None:
        wanted = settings.chromium or "chromium"
        return Screenshot(None, source, f"not taken: {wanted!r} not found (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return Screenshot(None, source, "not taken: the Python package playwright is missing")
    url = exchange.url
    refused: list[str] = []

    def route(route: object, request: object) -> None:
        if (
            getattr(request, "url", None) == url
            and getattr(request, "is_navigation_request", lambda: False)()
        ):
            route.fulfill(status=200, body=html, headers={"content-type": content_type})  # type: ignore[attr-defined]
        else:
            refused.append(str(getattr(request, "url", "")))
            route.abort("blockedbyclient")  # type: ignore[attr-defined]

    try:
        shared = _shared_browser.get()
        if shared is not None:
            png, cut = _shoot(shared, url, route)
        else:
            with sync_playwright() as playwright:
                browser = _launch(playwright, chromium)
                try:
                    png, cut = _shoot(browser, url, route)
                finally:
                    browser.close()
    except Exception as error:  # noqa: BLE001 - Playwright's errors, a crash, a timeout: the bundle goes on
        text = str(error).strip().splitlines()
        return Screenshot(
            None, source, f"not taken: Chromium failed ({text[0] if text else type(error).__name__})"
        )
    return Screenshot(bytes(png), source, cut=cut)


def _launch(playwright: Any, chromium: str) -> Any:
    return playwright.chromium.launch(
        executable_path=chromium, headless=True, args=list(CHROMIUM_ARGS), timeout=TIMEOUT_SECONDS * 1000
    )


def _shoot(browser: Any, url: str, route: Any) -> tuple[bytes, bool]:
    """The PNG of ``url`` in a new context of ``browser`` (nothing shared with another page: no cookies, no
    cache), and whether it was cut at :data:`MAX_HEIGHT`."""
    context = browser.new_context(
        java_script_enabled=False,
        service_workers="block",
        viewport={"width": SCREENSHOT_WIDTH, "height": 900},
    )
    try:
        page = context.new_page()
        page.route("**", route)
        page.goto(url, wait_until="load", timeout=TIMEOUT_SECONDS * 1000)
        height = int(page.evaluate("document.documentElement.scrollHeight") or 900)
        cut = height > MAX_HEIGHT
        png = page.screenshot(
            full_page=not cut,
            clip={"x": 0, "y": 0, "width": SCREENSHOT_WIDTH, "height": MAX_HEIGHT} if cut else None,
            type="png",
            timeout=TIMEOUT_SECONDS * 1000,
        )
        return bytes(png), cut
    finally:
        context.close()


@contextmanager
def one_browser(settings: Settings) -> Iterator[None]:
    """Keep one Chromium open for the screenshots taken inside (the bundles of a notice's copies): each
    screenshot then costs a page, not a browser's start (2-5 s). Does nothing when screenshots are off or no
    browser can start; a screenshot inside then starts its own, as outside."""
    chromium = chromium_path(settings) if settings.evidence_screenshot else None
    if chromium is None or _shared_browser.get() is not None:
        yield
        return
    try:
        from playwright.sync_api import sync_playwright

        manager = sync_playwright()
        playwright = manager.__enter__()
    except Exception:  # noqa: BLE001 - no Playwright, or it cannot start: each screenshot says why on its own
        yield
        return
    try:
        try:
            browser = _launch(playwright, chromium)
        except Exception:  # noqa: BLE001 - the same: the screenshots inside report the failure themselves
            yield
            return
        token = _shared_browser.set(browser)
        try:
            yield
        finally:
            _shared_browser.reset(token)
            browser.close()
    finally:
        manager.__exit__(None, None, None)
