"""HTML to PDF for takedown notices: WeasyPrint (PyPI) when it loads, else Debian's Chromium headless.

WeasyPrint needs Pango at run time; where it cannot load, ``chromium --headless --print-to-pdf`` does the same
job (``deploy/ensure-services.sh`` installs Debian's chromium). Either way nothing is fetched from the
network: WeasyPrint gets a URL fetcher that serves only the admin's own static files, and Chromium reads a
local file with networking off. The HTML is ours, with every crawled value escaped by Jinja."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["PdfUnavailable", "html_to_pdf", "pdf_engine"]

# the stylesheets the admin serves, so that a notice printed to PDF looks as it does on its page
STATIC = Path(__file__).resolve().parents[1] / "admin" / "static"


class PdfUnavailable(RuntimeError):
    """Neither WeasyPrint nor Chromium is available on this machine."""


def pdf_engine() -> str:
    """``weasyprint`` or ``chromium``; PdfUnavailable when neither can run here."""
    try:
        import weasyprint  # noqa: F401
    except (ImportError, OSError):
        if _chromium() is None:
            raise PdfUnavailable("printing to PDF needs WeasyPrint (pip) or chromium (apt)") from None
        return "chromium"
    return "weasyprint"


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _check_static(url: str) -> None:
    """Refuse any URL but a stylesheet of the admin's own static folder (no network, no other file)."""
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    if parts.scheme == "file":
        path = Path(unquote(parts.path)).resolve()
        if path.parent == STATIC.resolve() and path.suffix == ".css" and path.is_file():
            return
    raise ValueError(f"not fetching {url[:80]!r}: a notice uses only the admin's own stylesheets")


def _static_fetcher() -> Any:
    """A WeasyPrint URL fetcher that serves only :func:`_check_static` URLs (WeasyPrint 66+ takes a
    ``URLFetcher`` subclass, older releases a function)."""
    from weasyprint import urls

    base = getattr(urls, "URLFetcher", None)
    if isinstance(base, type):

        class StaticOnly(base):  # type: ignore[misc, valid-type]
            def fetch(self, url: str, headers: Any = None) -> Any:
                _check_static(url)
                return super().fetch(url, headers)

        return StaticOnly(allowed_protocols=["file"])

    def fetch(url: str) -> Any:
        _check_static(url)
        return urls.default_url_fetcher(url)

    return fetch


def html_to_pdf(html: str, engine: str | None = None) -> bytes:
    """Render ``html`` (stylesheets of ``admin/static`` linked by their bare name, ``notice.css``) to PDF."""
    engine = engine or pdf_engine()
    if engine == "weasyprint":
        import weasyprint

        base_url = STATIC.resolve().as_uri() + "/"
        document: bytes = weasyprint.HTML(
            string=html, base_url=base_url, url_fetcher=_static_fetcher()
        ).write_pdf()
        return document
    chromium = _chromium()
    if chromium is None:
        raise PdfUnavailable("chromium is not installed (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="fptrack-pdf-") as folder:
        source, target = Path(folder) / "notice.html", Path(folder) / "notice.pdf"
        for sheet in STATIC.glob("*.css"):
            shutil.copyfile(sheet, Path(folder) / sheet.name)
        source.write_text(html, encoding="utf-8")
        subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-pdf-header-footer",
                f"--user-data-dir={folder}/profile",
                f"--print-to-pdf={target}",
                source.as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        return target.read_bytes()
