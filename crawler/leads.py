"""Cloud-drive share links in a crawled page: the leads to a whole book that forums and pirate pages post.

:func:`find_share_links` reads a page's markup (or a plain text) and returns each share link it names once
per (platform, share id), with its extraction code (提取码 / 密码 / ``?pwd=``) and the text around it. It
reads links (``href``) and the visible text alike, after undoing what posters do to dodge link filters:
full-width characters (NFKC), a dot written as ``．`` ``。`` ``点`` ``[.]`` ``(.)`` ``dot``, spaces around
dots and slashes, and the code on the next line.

URL shapes recognised (share pages as the platforms serve them in 2026):

- ``baidu`` 百度网盘: ``pan.baidu.com/s/1<id>`` (``yun.baidu.com`` too) and
  ``pan.baidu.com/share/init?surl=<id>`` (the same share: its id without the leading ``1``); the code in
  ``?pwd=`` / ``#pwd=`` or beside the link;
- ``aliyun`` 阿里云盘: ``www.aliyundrive.com/s/<id>`` and ``www.alipan.com/s/<id>`` (one share, two domains);
- ``quark`` 夸克网盘: ``pan.quark.cn/s/<id>``;
- ``123pan`` 123云盘: ``www.123pan.com/s/<id>`` and its other domains (``123pan.cn``, ``123684.com``,
  ``123865.com``, ``123912.com``, ``123652.com``), ``.html`` dropped;
- ``lanzou`` 蓝奏云: ``<user>.lanzou?.com/<id>`` (``lanzoux``, ``lanzoui``, ``lanzouw``, ``lanzn``,
  ``lanzv``...; every domain serves every id), optionally under a folder segment.

Public shares are followed to their file: a 蓝奏云 share page serves its file to anyone without a login
(:data:`FOLLOWED_PLATFORMS`), through a frame and a download link; :func:`share_download_step` names the
next URL of that walk in a page of it, and the crawl (``crawler.spiders``) fetches the file and compares it
as any download. The other platforms need a login (and forbid automated access): they stay leads.

Pure: text in, frozen values out."""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass, field
from urllib.parse import urljoin

__all__ = [
    "FOLLOWED_PLATFORMS",
    "PLATFORMS",
    "SHARE_MAX_STEPS",
    "SHARE_WALK",
    "ShareLink",
    "find_share_links",
    "might_hold_share_links",
    "share_download_step",
]

# platform -> (name shown to a person, canonical share URL prefix)
PLATFORMS: dict[str, tuple[str, str]] = {
    "baidu": ("百度网盘", "https://pan.baidu.com/s/"),
    "aliyun": ("阿里云盘", "https://www.alipan.com/s/"),
    "quark": ("夸克网盘", "https://pan.quark.cn/s/"),
    "123pan": ("123云盘", "https://www.123pan.com/s/"),
    "lanzou": ("蓝奏云", "https://www.lanzoux.com/"),
}
FOLLOWED_PLATFORMS = frozenset({"lanzou"})
"""Platforms whose public shares serve the file without a login: the crawl follows them to it."""
SHARE_WALK = "fptrack_share_walk"
"""A request's meta key on the walk from a share link to its file: (the share's URL, steps taken)."""
SHARE_MAX_STEPS = 4
"""Pages of a share host walked through at most before its file (蓝奏云: the share page, its frame)."""

CONTEXT_CHARS = 80  # of text kept on each side of a link
CODE_WINDOW = 60  # characters after a link searched for its code

# cheap tests before any real work, so that a page without a share link costs two scans of its markup (about
# 0.1 ms for 17 KB; its main-text extraction takes tens of times that): the markers in the page lowered (any
# case), and around each run of full-width letters or digits, the only stretches folded (NFKC) and looked at
# again: folding a whole page cost 1 ms, and Chinese pages often hold full-width digits
_MARKERS = re.compile(r"baidu|aliyundrive|alipan|quark|123pan|1236(?:84|52)|123865|123912|lanz")
_LONGEST_MARKER = len("aliyundrive")
_FULL_WIDTH_RUN = re.compile("[\uff10-\uff19\uff21-\uff3a\uff41-\uff5a]+")

_SEP_DOT = re.compile(
    r"(?<=[a-z0-9])\s*(?:\.|。|点|\[\s*\.\s*\]|\(\s*\.\s*\)|\[\s*dot\s*\]|\(\s*dot\s*\)|\s+dot\s+)\s*(?=[a-z0-9])",
    re.IGNORECASE,
)
_SEP_SLASH = re.compile(r"(?<=[a-z0-9:])\s*/\s*(?=[a-z0-9/?#])", re.IGNORECASE)
_SEP_COLON = re.compile(r"(?<=http)(s?)\s*:\s*(?=/)", re.IGNORECASE)

_ID = r"[A-Za-z0-9_-]"
_LINKS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "baidu",
        re.compile(
            rf"(?:pan|yun)\.baidu\.com/(?:s/(?P<id>{_ID}{{5,64}})|share/init\?surl=(?P<surl>{_ID}{{5,64}}))"
            rf"(?:[?&#]pwd=(?P<pwd>[A-Za-z0-9]{{4}}))?",
            re.IGNORECASE,
        ),
    ),
    (
        "aliyun",
        re.compile(
            r"(?:aliyundrive|alipan)\.com/s/(?P<id>[A-Za-z0-9]{6,40})(?:[?&#]pwd=(?P<pwd>[A-Za-z0-9]{4,6}))?",
            re.IGNORECASE,
        ),
    ),
    (
        "quark",
        re.compile(
            r"pan\.quark\.cn/s/(?P<id>[A-Za-z0-9]{6,40})(?:[?&#]pwd=(?P<pwd>[A-Za-z0-9]{4,6}))?",
            re.IGNORECASE,
        ),
    ),
    (
        "123pan",
        re.compile(
            r"(?:123pan\.com|123pan\.cn|123684\.com|123865\.com|123912\.com|123652\.com)/s/"
            r"(?P<id>[A-Za-z0-9-]{4,40}?)(?:\.html)?(?![A-Za-z0-9-])(?:[?&#](?:pwd|提取码)=(?P<pwd>[A-Za-z0-9]{4,6}))?",
            re.IGNORECASE,
        ),
    ),
    (
        "lanzou",
        re.compile(
            r"(?:[a-z0-9-]+\.)?(?:lanzou[a-z]?|lanzn|lanzv)\.com/(?:[A-Za-z0-9_-]+/)?(?P<id>[A-Za-z0-9]{5,40})"
            r"(?![A-Za-z0-9./_-])",
            re.IGNORECASE,
        ),
    ),
)
_CODE = re.compile(
    r"(?:提取码|提取碼|访问码|訪問碼|密码|密碼|取件码|口令|pwd|passcode|password|code)\s*[:：=]?\s*"
    r"(?P<code>[A-Za-z0-9]{4,6})(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_HREF = re.compile(r"<a\b[^>]*?\bhref\s*=\s*([\"']?)([^\"'\s>]+)\1[^>]*>", re.IGNORECASE)
_DROP = re.compile(r"<(script|style|noscript)\b.*?</\1\s*>|<!--.*?-->", re.IGNORECASE | re.DOTALL)
_BLOCK = re.compile(r"<(?:br|/p|/div|/li|/tr|/h[1-6]|p|div|li|tr)\b[^>]*>", re.IGNORECASE)
_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class ShareLink:
    """One share named on a page: ``platform`` (a :data:`PLATFORMS` key), its ``share_id`` (as the platform
    spells it: ``1...`` for Baidu), the canonical ``url``, the extraction ``code`` ('' when none is given) and
    the ``context``: the text around it, whitespace collapsed; ``linked``: the URL as the page wrote it
    (its scheme, ``https`` when none, and host: every 蓝奏云 domain serves every share), to follow it by."""

    platform: str
    share_id: str
    url: str
    code: str
    context: str
    linked: str = field(default="", compare=False)


def might_hold_share_links(text: str) -> bool:
    """Whether a page is worth reading for share links at all (False for nearly every page, cheaply). A marker
    written partly in full-width forms lies within :data:`_LONGEST_MARKER` characters of a full-width run."""
    if _MARKERS.search(text.lower()) is not None:
        return True
    for run in _FULL_WIDTH_RUN.finditer(text):
        around = text[max(0, run.start() - _LONGEST_MARKER) : run.end() + _LONGEST_MARKER]
        if _MARKERS.search(unicodedata.normalize("NFKC", around).lower()) is not None:
            return True
    return False


def _visible(markup: str) -> str:
    """The text a reader sees, each link's target written where the link stands (so the text around a link
    is its context), blocks on lines of their own."""
    if "<" not in markup:
        return markup
    text = _DROP.sub(" ", markup)
    text = _HREF.sub(lambda m: f" {m.group(2)} ", text)
    text = _BLOCK.sub("\n", text)
    return html.unescape(_TAG.sub("", text))


def _undo_disguise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    text = _SEP_COLON.sub(r"\1:", text)
    text = _SEP_DOT.sub(".", text)
    return _SEP_SLASH.sub("/", text)


def find_share_links(markup: str) -> tuple[ShareLink, ...]:
    """Every share link named in ``markup`` (HTML or plain text), once per (platform, share id), in the order
    first named; a code found at any mention is kept. A link's context is the text around its first mention
    (at most :data:`CONTEXT_CHARS` each side), not reaching past another share's link; its code is searched
    in the :data:`CODE_WINDOW` characters after a mention, not past another share's link either."""
    if not might_hold_share_links(markup):
        return ()
    text = _undo_disguise(_visible(markup))
    found: list[tuple[int, int, str, str, str]] = []  # start, end, platform, id, code in the URL
    for platform, pattern in _LINKS:
        for m in pattern.finditer(text):
            groups = m.groupdict()
            share_id = groups.get("id") or ""
            if platform == "baidu" and not share_id:
                share_id = "1" + (groups.get("surl") or "")
            if platform == "lanzou" and share_id.lower() in {"html", "index", "account", "u", "fn"}:
                continue
            found.append((m.start(), m.end(), platform, share_id, groups.get("pwd") or ""))
    found.sort()
    keys = [(platform, share_id) for _, _, platform, share_id, _ in found]
    links: dict[tuple[str, str], ShareLink] = {}
    for n, (start, end, platform, share_id, code) in enumerate(found):
        key = keys[n]
        # the text between this share and its neighbours is its own (a post of several links names each
        # one's book beside it); mentions of the same share (a link and its own text) are no boundary
        previous = max((found[i][1] for i in range(n) if keys[i] != key and found[i][1] <= start), default=0)
        following = min(
            (found[i][0] for i in range(n + 1, len(found)) if keys[i] != key and found[i][0] >= end),
            default=len(text),
        )
        if not code and (named := _CODE.search(text[end : min(end + CODE_WINDOW, following)])) is not None:
            code = named.group("code")
        before = text[max(previous, start - CONTEXT_CHARS) : start]
        after = text[end : min(following, end + CONTEXT_CHARS)]
        context = _SPACE.sub(" ", f"{before}{text[start:end]}{after}").strip()
        held = links.get(key)
        if held is None:
            scheme = "http://" if text[max(0, start - 7) : start].lower() == "http://" else "https://"
            linked = scheme + text[start:end]
            links[key] = ShareLink(
                platform, share_id, PLATFORMS[platform][1] + share_id, code, context, linked
            )
        elif code and not held.code:
            links[key] = ShareLink(platform, held.share_id, held.url, code, held.context, held.linked)
    return tuple(links.values())


_FRAME = re.compile(r"<iframe\b[^>]*?\bsrc\s*=\s*([\"'])([^\"']+)\1", re.IGNORECASE)
_ANCHOR = re.compile(r"<a\b([^>]*)>(.*?)</a\s*>", re.IGNORECASE | re.DOTALL)
_ANCHOR_HREF = re.compile(r"\bhref\s*=\s*([\"'])([^\"']+)\1", re.IGNORECASE)
_DOWNLOAD_WORDS = re.compile(r"下载|下載|download", re.IGNORECASE)
_SCRIPT_HREF = re.compile(r"^\s*(?:javascript:|#)", re.IGNORECASE)


def share_download_step(markup: str, base_url: str) -> str | None:
    """The next URL from a public share's page toward its file: the page's first frame (a 蓝奏云 share page
    holds its download box in one), else its first link whose text, title or class says download
    (下载, download), absolute; None when the page has neither (a share behind a password or a login, a
    removed share)."""
    markup = _DROP.sub(" ", markup)
    frame = _FRAME.search(markup)
    if frame is not None:
        return urljoin(base_url, html.unescape(frame.group(2)))
    for anchor in _ANCHOR.finditer(markup):
        attributes, label = anchor.group(1), _TAG.sub("", anchor.group(2))
        href = _ANCHOR_HREF.search(attributes)
        if href is None or _SCRIPT_HREF.match(href.group(2)):
            continue
        if _DOWNLOAD_WORDS.search(label) or _DOWNLOAD_WORDS.search(_ANCHOR_HREF.sub("", attributes)):
            return urljoin(base_url, html.unescape(href.group(2)))
    return None
