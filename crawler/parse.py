"""Turn one Scrapy response into a :class:`CrawledPage` and the links it offers (pure functions).

Decoding follows the order a browser uses, then checks it: the HTTP ``Content-Type`` charset, else a
``<meta charset>`` / ``<meta http-equiv="Content-Type">`` in the first bytes, handed to
:func:`fingerprint.encoding.decode_bytes` as a *claim*; that function keeps the claim only when the bytes
decode under it and otherwise detects (pages that lie about their charset exist).
"""

from __future__ import annotations

import codecs
import hashlib
import html
import re
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from scrapy.http import Response

from fptrack.crawler.extract import cap_text, extract_main_text, tidy_whitespace
from fptrack.crawler.guard import GUARD_REFUSAL
from fptrack.crawler.leads import find_share_links
from fptrack.crawler.multipage import next_part_url
from fptrack.crawler.pages import CrawledPage
from fptrack.fingerprint.containers import ContainerLimits, file_kind, joined_text, read_download
from fptrack.fingerprint.encoding import UndecodableError, decode_bytes, looks_binary, without_stray_nuls
from fptrack.storage.match_life import UNSETTLED_MARK, UNSETTLED_NOTE

__all__ = [
    "FILE_TYPES",
    "ParsedResponse",
    "charset_from_content_type",
    "charset_from_meta",
    "describe_failure",
    "download_problem",
    "is_binary_media_type",
    "is_download",
    "is_listing",
    "media_type",
    "parse_response",
]

_META_SCAN_BYTES = 4096
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([a-zA-Z0-9_.:\-]+)""", re.IGNORECASE)
_CHARSET_PARAM = re.compile(r"""charset\s*=\s*["']?\s*([a-zA-Z0-9_.:\-]+)""", re.IGNORECASE)
_NUMBER = re.compile(r"\d+")
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", "application/xml", "text/xml", ""})
_TEXT_TYPES = frozenset({"text/plain"})
# listing pages (see is_listing)
# bounded both ways: a hostile page of unclosed anchors costs a linear scan, not a quadratic one
_ANCHOR = re.compile(r"<a\b[^>]{0,1000}>(.{0,300}?)</a\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")
_ENTITY = re.compile(r"&#?\w+;")
# where a feed or sitemap names its pages: <loc> (sitemaps), <link>URL</link> (RSS), <link href="URL"> (Atom)
_FEED_LINK = re.compile(
    r"<loc>\s*([^<\s]+)\s*</loc>|<link>\s*([^<\s]+)\s*</link>|<link\b[^>]{0,500}?\bhref\s*=\s*[\"']([^\"']+)",
    re.IGNORECASE,
)
_FEED_ROOT = re.compile(r"<(rss|feed|urlset|sitemapindex|rdf:RDF)\b", re.IGNORECASE)
LISTING_MIN_LINKS = 2  # a page with fewer links lists nothing worth coming back for
LISTING_LINK_SHARE = 0.5  # link text at least this share of the page's own text: it lists rather than tells
LISTING_SHORT_TEXT = 200  # characters: a page whose own text is shorter holds no chapter; it leads to others
_WIDE_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_BE)  # and UTF-32 LE's (FF FE 00 00)
_BINARY_PREFIXES = ("image/", "audio/", "video/", "font/", "model/")
_BINARY_TYPES = frozenset(
    {
        "application/msword",
        "application/x-shockwave-flash",
        "application/wasm",
        "application/java-archive",
        "application/vnd.android.package-archive",
        "application/x-msdownload",
    }
)
# downloads read for the texts they hold (fingerprint.containers sniffs what the bytes are: a Content-Type or
# a file name may lie)
FILE_TYPES = frozenset(
    {
        "application/octet-stream",
        "application/force-download",
        "application/x-download",
        "application/zip",
        "application/x-zip-compressed",
        "application/gzip",
        "application/x-gzip",
        "application/x-bzip2",
        "application/x-xz",
        "application/x-rar-compressed",
        "application/vnd.rar",
        "application/x-rar",
        "application/x-7z-compressed",
        "application/x-tar",
        "application/x-gtar",
        "application/pdf",
        "application/epub+zip",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/x-mobipocket-ebook",
        "application/vnd.amazon.ebook",
    }
)
_DOWNLOAD = "download: "
# the ends of a URL's path that name a file (whose size cap is FPTRACK_DOWNLOAD_MAX_BYTES, not a page's)
_FILE_SUFFIX = re.compile(r"\.(?:txt|zip|7z|rar|tar|gz|tgz|bz2|xz|epub|mobi|azw3?|pdf|docx)$", re.IGNORECASE)
_HTML_START = re.compile(rb"\s*(?:\xef\xbb\xbf)?\s*<(?:!doctype\s+html|html[\s>])", re.IGNORECASE)
_FILE_NAME = re.compile(r"""filename\*?\s*=\s*(?:UTF-8'')?["']?([^"';]+)""", re.IGNORECASE)


@dataclass(frozen=True)
class ParsedResponse:
    page: CrawledPage
    links: tuple[str, ...]


def media_type(content_type: str) -> str:
    """``'text/html; charset=gbk'`` -> ``'text/html'``."""
    return content_type.split(";", 1)[0].strip().lower()


def is_binary_media_type(mime: str) -> bool:
    """True for media types that are never text worth fingerprinting (images, archives, PDFs...)."""
    return mime.startswith(_BINARY_PREFIXES) or mime in _BINARY_TYPES


def is_download(url: str, content_type: str, disposition: str = "") -> bool:
    """Whether a response is a downloaded file, known from its head alone: a :data:`FILE_TYPES` type, an
    attachment that is not HTML, or a URL whose path ends in a file's extension (``.zip``, ``.txt``...) and
    whose type is not HTML. Such a body may reach ``FPTRACK_DOWNLOAD_MAX_BYTES``."""
    mime = media_type(content_type)
    if mime in FILE_TYPES:
        return True
    if mime in _HTML_TYPES and mime:
        return False
    return disposition.strip().lower().startswith("attachment") or bool(
        _FILE_SUFFIX.search(urlsplit(url).path)
    )


def charset_from_content_type(content_type: str) -> str | None:
    match = _CHARSET_PARAM.search(content_type)
    return match.group(1) if match else None


def charset_from_meta(body: bytes) -> str | None:
    """The charset a document declares in a ``<meta>`` element near its start, if any."""
    match = _META_CHARSET.search(body[:_META_SCAN_BYTES])
    return match.group(1).decode("ascii", errors="ignore") if match else None


def _header(response: Response, name: bytes) -> str:
    return (response.headers.get(name) or b"").decode("latin-1").strip()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def parse_response(
    response: Response,
    *,
    requested_url: str,
    fetched_at: datetime,
    max_links: int | None = None,
    max_chars: int | None = None,
    file_limits: ContainerLimits | None = None,
    max_file_chars: int | None = None,
) -> ParsedResponse:
    """Decode and extract one response. Never raises for bad content: the page's ``error`` says why.

    Only 200 responses with a text body get text; only HTML pages give links, at most ``max_links``. The text
    is cut to ``max_chars`` at a paragraph boundary; the page's ``note`` records such cuts (and repairs).

    A download (a :data:`FILE_TYPES` response, or one sent as an attachment) is read by
    :func:`fingerprint.containers.read_download` within ``file_limits``: its texts, each member's after a line
    naming it, are the page's text (cut to ``max_file_chars``); what could not be read is in its ``note`` (its
    ``error`` when nothing could)."""
    body = response.body or b""
    content_type = (response.headers.get(b"Content-Type") or b"").decode("latin-1")
    mime = media_type(content_type)
    common = {
        "url": requested_url,
        "final_url": response.url,
        "status": response.status,
        "snapshot_sha256": _sha256(body),
        "fetched_at": fetched_at,
    }
    if response.status == 200:  # the validators a conditional re-crawl sends back
        common["etag"] = _header(response, b"ETag")[:300]
        common["last_modified"] = _header(response, b"Last-Modified")[:100]

    def without_text(error: str) -> ParsedResponse:
        page = CrawledPage(encoding="", title="", text="", content_sha256=_sha256(b""), error=error, **common)  # type: ignore[arg-type]
        return ParsedResponse(page=page, links=())

    if response.status == 304:
        page = CrawledPage(
            encoding="",
            title="",
            text="",
            content_sha256="",
            error="not modified",
            not_modified=True,
            **common,  # type: ignore[arg-type]
        )
        return ParsedResponse(page=page, links=())
    if response.status != 200:
        return without_text(f"HTTP {response.status}")
    if is_binary_media_type(mime):
        return without_text(f"binary content ({mime})")
    if mime in FILE_TYPES or (
        _header(response, b"Content-Disposition").lower().startswith("attachment") and mime not in _HTML_TYPES
    ):
        if not _HTML_START.match(body[:1024]):
            return ParsedResponse(
                page=_download_page(response, body, common, file_limits, max_file_chars), links=()
            )
        mime = "text/html"  # a page served as a file (a misconfigured server): read as the page it is
    if mime not in _HTML_TYPES and mime not in _TEXT_TYPES and not mime.startswith("text/"):
        return without_text(f"not text ({mime})")
    if not body.strip():
        return without_text("empty body")
    if not body.startswith(_WIDE_BOMS):  # UTF-16 text is half NULs
        body = without_stray_nuls(body)  # a few stray NULs in a text page are damage, not a binary file
    if looks_binary(body) and not body.startswith(_WIDE_BOMS):
        if file_kind(body) != "txt":  # an archive, an e-book or a PDF sent as a page (or with no type)
            return ParsedResponse(_download_page(response, body, common, file_limits, max_file_chars), ())
        return without_text(f"binary content ({mime or 'no content type'})")

    declared = charset_from_content_type(content_type)
    if declared is None and mime not in _TEXT_TYPES:
        declared = charset_from_meta(body)
    try:
        decoded = decode_bytes(body, declared=declared)
    except UndecodableError as exc:
        return without_text(f"undecodable: {exc}")
    encoding = decoded.encoding

    notes: tuple[str, ...] = ()
    error = ""
    next_part = ""
    listing = False
    if mime in _HTML_TYPES:
        extracted = extract_main_text(
            decoded.text, base_url=response.url, max_links=max_links, max_chars=max_chars
        )
        title, text, links, notes = extracted.title, extracted.text, extracted.links, extracted.notes
        if UNSETTLED_MARK in decoded.text[:4096]:  # the browser read it before its scripts were done
            notes = (*notes, UNSETTLED_NOTE)
        error = extracted.error
        next_part = next_part_url(decoded.text, response.url)
        listing = is_listing(decoded.text, text, len(links))
        share_links = find_share_links(decoded.text)
        if _FEED_ROOT.search(decoded.text[:1024]):
            links = feed_links(decoded.text, response.url, max_links)
    else:  # plain text (e.g. a .txt download): every non-empty line is a paragraph
        lines = (tidy_whitespace(line) for line in decoded.text.splitlines())
        title, text, links = "", "\n".join(line for line in lines if line), ()
        share_links = find_share_links(text)
        if max_chars is not None:
            text, notes = cap_text(text, max_chars)
    del decoded

    page = CrawledPage(
        encoding=encoding,
        title=title,
        text=text,
        content_sha256=_sha256(text.encode("utf-8")),
        # a document that could not be parsed at all (nesting too deep) has no text, and says why
        error=error,
        note="; ".join(notes),
        next_part_url=next_part,
        listing=listing,
        share_links=share_links,
        **common,  # type: ignore[arg-type]
    )
    return ParsedResponse(page=page, links=links)


def _download_page(
    response: Response,
    body: bytes,
    common: dict[str, object],
    limits: ContainerLimits | None,
    max_chars: int | None,
) -> CrawledPage:
    """The page of a downloaded file: the texts it holds (see :func:`parse_response`)."""
    reading = read_download(body, name=download_name(response), limits=limits)
    lines = (tidy_whitespace(line) for line in joined_text(reading.documents).splitlines())
    text = "\n".join(line for line in lines if line)
    notes: tuple[str, ...] = ()
    if max_chars is not None:
        text, notes = cap_text(text, max_chars)
    kinds = sorted({document.kind for document in reading.documents})
    summary = f"{_DOWNLOAD}{reading.kind}" + (
        f", {len(reading.documents)} text(s) read ({', '.join(kinds)})" if reading.documents else ""
    )
    problems = tuple(reading.problems)
    return CrawledPage(
        encoding=reading.documents[0].encoding if reading.documents else "",
        title=download_name(response),
        text=text,
        content_sha256=_sha256(text.encode("utf-8")),
        error="" if text else f"{summary}: no text ({'; '.join(problems) or 'nothing readable'})"[:1000],
        note="; ".join((summary, *problems, *notes))[:2000] if text else "",
        **common,  # type: ignore[arg-type]
    )


def download_problem(page: CrawledPage) -> str:
    """What a downloaded file's page says it could not read (a cap reached, damage), or ``''``: its error
    when it gave no text, else its note past the summary (a note of a download that was read whole is the
    summary alone)."""
    if page.error.startswith(_DOWNLOAD):
        return page.error
    if page.note.startswith(_DOWNLOAD) and "; " in page.note:
        return page.note
    return ""


def download_name(response: Response) -> str:
    """A download's file name: its ``Content-Disposition``'s, else the URL path's last segment."""
    found = _FILE_NAME.search(_header(response, b"Content-Disposition"))
    if found:
        return unquote(found.group(1).strip())[:200]
    return unquote(urlsplit(response.url).path.rsplit("/", 1)[-1])[:200]


def is_listing(markup: str, main_text: str, link_count: int) -> bool:
    """Whether a page lists other pages (an entry page, a table of contents, a feed or a sitemap) rather than
    holding a text of its own: re-crawls fetch listings again to find new links, and leave known pages that
    are not listings to the re-check cadence (crawler/spiders.py).

    A feed or sitemap is a listing by its root element. An HTML page is one when it has links
    (:data:`LISTING_MIN_LINKS` at least) and either almost no text of its own (a chapter has hundreds of
    characters at least) or link text amounting to :data:`LISTING_LINK_SHARE` of its main text: a chapter's
    prev/next/目录 bar and a sidebar of links are short beside its prose, a table of contents is all links.
    Erring towards "listing" costs one request per crawl; erring the other way hides new chapters, so a short
    page counts as a listing."""
    if _FEED_ROOT.search(markup[:1024]):
        return True
    if link_count < LISTING_MIN_LINKS:
        return False
    own = _visible_chars(main_text)
    if own < LISTING_SHORT_TEXT:
        return True
    linked = sum(_visible_chars(_TAG.sub("", match.group(1))) for match in _ANCHOR.finditer(markup))
    return linked >= LISTING_LINK_SHARE * own


def feed_links(markup: str, base_url: str, max_links: int | None = None) -> tuple[str, ...]:
    """The pages a feed or sitemap lists (http and https URLs, absolute, each once, in document order, at most
    ``max_links``): what a re-crawl follows from it, as it follows a table of contents' anchors."""
    found: dict[str, None] = {}
    for match in _FEED_LINK.finditer(markup):
        raw = html.unescape(next(group for group in match.groups() if group)).strip()
        url = urldefrag(urljoin(base_url, raw)).url
        if urlsplit(url).scheme in ("http", "https"):
            found.setdefault(url)
            if max_links is not None and len(found) >= max_links:
                break
    return tuple(found)


def _visible_chars(text: str) -> int:
    """Characters of ``text`` other than whitespace (an entity counts as one)."""
    return len("".join(_ENTITY.sub("x", text).split()))


def describe_failure(
    error: BaseException,
    *,
    timeout: float | None = None,
    max_bytes: int | None = None,
    received: int = 0,
    file: bool = False,
) -> str:
    """A one-line, human-readable reason for a request that got no response. ``received`` is how many body
    bytes had arrived: a body without a Content-Length (chunked) that outgrows ``max_bytes`` is cancelled
    silently by Scrapy, and only this count tells that cancel from others. ``file``: the response was a
    downloaded file, whose cap is FPTRACK_DOWNLOAD_MAX_BYTES (the reason names it)."""
    from scrapy import exceptions as scrapy_errors
    from twisted.internet import error as net
    from twisted.internet.defer import CancelledError
    from twisted.web._newclient import ResponseFailed, ResponseNeverReceived

    def kinds(*names: str) -> tuple[type[BaseException], ...]:
        # Scrapy >= 2.13 wraps Twisted's errors in its own classes; older versions raise Twisted's.
        return tuple(getattr(scrapy_errors, name) for name in names if hasattr(scrapy_errors, name))

    message = tidy_whitespace(str(error))
    which = "a file's size cap, FPTRACK_DOWNLOAD_MAX_BYTES" if file else "the download size cap"
    if message.startswith(GUARD_REFUSAL):  # crawler.guard, either layer
        return message
    if isinstance(error, (net.ConnectionRefusedError, *kinds("DownloadConnectionRefusedError"))):
        return "connection refused"
    if isinstance(error, (net.DNSLookupError, *kinds("CannotResolveHostError"))):
        return "DNS lookup failed (no such host)"
    if isinstance(
        error, (net.TimeoutError, net.TCPTimedOutError, TimeoutError, *kinds("DownloadTimeoutError"))
    ):
        return f"timed out after {timeout:g} s" if timeout else "timed out"
    if isinstance(error, (CancelledError, *kinds("DownloadCancelledError"))):
        if "max size" in message:  # Content-Length over the cap; Scrapy's wording varies with its version
            numbers = _NUMBER.findall(message.split(" in request ")[0])
            cap = max_bytes or (int(numbers[-1]) if numbers else 0)
            announced = f": {numbers[0]} bytes announced" if len(numbers) >= 2 else ""
            return f"larger than {cap} bytes ({which}){announced}"
        if max_bytes and received > max_bytes:
            return f"larger than {max_bytes} bytes ({which}): stopped after {received} bytes"
        return "download cancelled" + (f": {message}" if message else "")
    if isinstance(
        error,
        (
            ResponseNeverReceived,
            ResponseFailed,
            net.ConnectionLost,
            net.ConnectionDone,
            *kinds("ResponseDataLossError", "DownloadFailedError"),
        ),
    ):
        return "connection lost" + (f": {message}" if message else " before the response was complete")
    if isinstance(error, scrapy_errors.IgnoreRequest):
        if message.startswith("max redirections reached"):
            return "too many redirects"
        return message or "request ignored"
    return f"{type(error).__name__}: {message}" if message else type(error).__name__
