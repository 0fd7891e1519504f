"""Chapter pages drawn as images (图片章节): which pages need OCR, and which of their images hold the chapter.

Decided from the page's HTML alone, so an ordinary page costs one length check: only a page whose main text
is shorter than ``min_chars`` (a chapter has hundreds of characters at least) is looked at, and only then is
its markup parsed for ``<img>`` elements. An image is the chapter's when it is a picture format worth reading
(not ``.gif``, ``.svg``, ``.ico`` or a ``data:`` URI), is not declared smaller than
:data:`MIN_DECLARED_PIXELS` either way, names no page chrome (logo, icon, avatar, banner, ad, QR code...) in
its own or an ancestor's ``id``/``class``/``src``, and either sits in a content element (an ancestor whose
``id``/``class`` says content, chapter, text, read, article, book...) or is declared large. Lazy-loading
attributes (``data-src``, ``data-original``) are read before ``src``. The spider fetches the images
(:mod:`crawler.spiders`) and :func:`fingerprint.ocr.read_images` reads them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

from fptrack.fingerprint.ocr import OcrLimits

__all__ = [
    "CHAPTER_IMAGE",
    "IMAGE_NOTE",
    "MIN_DECLARED_PIXELS",
    "OcrPlan",
    "chapter_image_urls",
    "image_problem",
    "needs_ocr",
]

MIN_DECLARED_PIXELS = 120  # an image declared narrower or lower than this is an icon, not a page of text
_LARGE_DECLARED = 400  # declared at least this wide or high: a picture of the page, wherever it sits
_SOURCE_ATTRIBUTES = ("data-src", "data-original", "data-lazy-src", "src")
_SKIPPED_EXTENSIONS = (".gif", ".svg", ".ico")
_CHROME = re.compile(
    r"logo|icon|avatar|banner|(?:^|[\W_])ads?(?:$|[\W_])|advert|qr|erweima|button|btn|loading|spacer|pixel|"
    r"cover|thumb|header|footer|nav|sidebar|comment|share|emoji|badge",
    re.IGNORECASE,
)
_CONTENT = re.compile(
    r"content|chapter|chaptercontent|txt|text|read|article|book|novel|main|cont|nr|zw|page", re.IGNORECASE
)
_NUMBER = re.compile(r"\d+")


def needs_ocr(text: str, *, min_chars: int) -> bool:
    """Whether a page's main text is short enough that its images may hold its chapter (the only check an
    ordinary page pays)."""
    return (
        min_chars > 0 and len(text) < min_chars and sum(1 for char in text if not char.isspace()) < min_chars
    )


def chapter_image_urls(markup: str, base_url: str, *, max_images: int) -> tuple[str, ...]:
    """The absolute http(s) URLs of the images of ``markup`` that hold its chapter, in document order, each
    once, at most ``max_images`` (see the module's docstring)."""
    if max_images <= 0 or "<img" not in markup.lower():
        return ()
    import lxml.html

    try:
        root = lxml.html.document_fromstring(markup)
    except (ValueError, lxml.etree.ParserError):
        return ()
    found: dict[str, None] = {}
    for image in root.iter("img"):
        source = next((image.get(name) for name in _SOURCE_ATTRIBUTES if image.get(name)), "")
        source = (source or "").strip()
        if not source or source.startswith("data:"):
            continue
        url = urljoin(base_url, source)
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or parts.path.lower().endswith(_SKIPPED_EXTENSIONS):
            continue
        width, height = _declared(image.get("width")), _declared(image.get("height"))
        if (width is not None and width < MIN_DECLARED_PIXELS) or (
            height is not None and height < MIN_DECLARED_PIXELS
        ):
            continue
        names = [f"{image.get('id', '')} {image.get('class', '')} {parts.path}"]
        names += [f"{node.get('id', '')} {node.get('class', '')}" for node in image.iterancestors()]
        if any(_CHROME.search(name) for name in names):
            continue
        large = any(size is not None and size >= _LARGE_DECLARED for size in (width, height))
        if not large and not any(_CONTENT.search(name) for name in names[1:]):
            continue
        found.setdefault(url)
        if len(found) >= max_images:
            break
    return tuple(found)


def _declared(value: str | None) -> int | None:
    match = _NUMBER.match((value or "").strip())
    return int(match.group()) if match else None


CHAPTER_IMAGE = "fptrack_image"  # request meta key of a chapter image's request (crawler.spiders)
IMAGE_NOTE = "images: "  # a page note's start when its text was read from its images


@dataclass(frozen=True)
class OcrPlan:
    """Whether and how a crawl reads chapter images: pages with less main text than ``min_chars`` have up to
    ``max_images`` images fetched and read within ``limits`` (``max_images`` 0: never)."""

    min_chars: int = 200
    max_images: int = 20
    limits: OcrLimits = field(default_factory=OcrLimits)

    @property
    def active(self) -> bool:
        return self.max_images > 0 and self.min_chars > 0


def image_problem(note: str) -> str:
    """The part of a page's note saying which of its chapter images could not be read, or ``''``."""
    if note.startswith(IMAGE_NOTE) and "; " in note:
        return note
    return ""
