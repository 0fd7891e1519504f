"""Takedown notices to PDF: WeasyPrint, and Debian's Chromium as the fallback; neither fetches anything but
the admin's own stylesheets."""

from __future__ import annotations

import pytest

from fptrack.services.pdf import STATIC, _check_static, html_to_pdf

HTML = (
    '<!doctype html><html><head><link rel="stylesheet" href="notice.css"></head><body '
    'class="notice-document">'
    "<h1>侵权通知 notice</h1></body></html>"
)


def test_weasyprint_renders_a_notice() -> None:
    assert html_to_pdf(HTML, engine="weasyprint").startswith(b"%PDF-")


@pytest.mark.browser
def test_chromium_renders_a_notice() -> None:
    assert html_to_pdf(HTML, engine="chromium").startswith(b"%PDF-")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/x.css",
        "file:///etc/passwd",
        (STATIC / "../web.py").as_uri(),
        (STATIC / "nope.css").as_uri(),
    ],
)
def test_only_our_stylesheets_are_fetched(url: str) -> None:
    with pytest.raises(ValueError, match="not fetching"):
        _check_static(url)
    _check_static((STATIC / "notice.css").as_uri())
