"""Debian's Chromium as every part of fptrack starts it (the crawl's renderer and browser fetches, the
evidence screenshot): where the executable is, and the arguments that keep the browser off the network."""

from __future__ import annotations

import shutil

from fptrack.core.settings import Settings

__all__ = ["CHROMIUM_ARGS", "DEAD_PROXY", "chromium_path"]

DEAD_PROXY = "127.0.0.1:1"  # nothing listens on port 1 (tcpmux, unassigned in practice)
CHROMIUM_ARGS = (
    "--no-sandbox",  # a crawler may run as root in a container; the renderer has no privileges to drop anyway
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    # The browser itself never goes on the network: what a page asks for is fetched (or refused) by the
    # caller's route handler. What is not routed (Chromium's own update checks, DNS prefetch...) meets a proxy
    # that refuses every connection and a resolver that finds no host.
    f"--proxy-server=http://{DEAD_PROXY}",
    "--host-resolver-rules=MAP * ~NOTFOUND",
)


def chromium_path(settings: Settings) -> str | None:
    """Debian's Chromium (``FPTRACK_CHROMIUM``, else ``chromium`` / ``chromium-browser`` on the PATH), or
    None. Playwright never downloads a browser here."""
    if settings.chromium:
        return shutil.which(settings.chromium)
    return shutil.which("chromium") or shutil.which("chromium-browser")
