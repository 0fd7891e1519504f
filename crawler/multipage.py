"""Chapters split over several pages: find, at parse time, the link to a page's next part (pure functions).

Pirate sites cut a long chapter into pages chained by a "下一页" (next page) link: ``123.html`` ->
``123_2.html`` -> ``123_3.html``. Each part alone may be too short to match a registered chapter; joined they
are the chapter (:mod:`compare.multipage` joins them once the site's crawl has settled).

A link is the next *part* only when both hold, so that "下一章" (next chapter) or a list's "下一页" never
chain two chapters:

- its text is a "next page" label (:data:`NEXT_LABELS`: 下一页, 下页, 下一頁, 下頁, 下一分页, 下一节 is *not*
  one);
- its URL continues the page's own: same directory and stem, part number one more (``stem.ext`` /
  ``stem_N.ext`` -> ``stem_{N+1}.ext``; ``_`` or ``-``), as these sites name the parts.
"""

from __future__ import annotations

import re
from urllib.parse import urldefrag, urljoin, urlsplit

import lxml.etree
import lxml.html

from fptrack.crawler.extract import shorten_huge_tags

__all__ = ["NEXT_LABELS", "next_part_url", "part_of"]

NEXT_LABELS = frozenset({"下一页", "下页", "下一頁", "下頁", "下一分页", "下一页>", "下一页>>", "下一页→"})
# what every label of NEXT_LABELS holds (下一页, 下页, 下一頁, 下頁): one scan of the page, not one per hint
_LABEL_HINT = re.compile("下一?[页頁]")
_PART = re.compile(r"^(?P<stem>.+?)(?:[_-](?P<number>\d{1,3}))?(?P<ext>\.[A-Za-z0-9]{1,6})?$")
_SPACES = re.compile(r"[\s\u3000\xa0]+")


def part_of(url: str) -> tuple[str, int] | None:
    """``(first part's URL, part number)`` as the URL names it: ``.../123_3.html`` -> ``(.../123.html, 3)``,
    ``.../123.html`` -> ``(.../123.html, 1)``; None for a URL with no file name (a directory)."""
    parts = urlsplit(urldefrag(url)[0])
    directory, _, name = parts.path.rpartition("/")
    match = _PART.match(name) if name else None
    if match is None:
        return None
    number = int(match.group("number") or 1)
    first = f"{match.group('stem')}{match.group('ext') or ''}"
    return parts._replace(path=f"{directory}/{first}", query="", fragment="").geturl(), number


def _continues(page_url: str, link_url: str) -> bool:
    here, there = part_of(page_url), part_of(link_url)
    if here is None or there is None or here[0] != there[0]:
        return False
    if urlsplit(page_url).netloc != urlsplit(link_url).netloc:
        return False
    return there[1] == here[1] + 1


def next_part_url(html: str, page_url: str) -> str:
    """The URL of the next part of the chapter on ``html`` (served at ``page_url``), or ``''``."""
    if _LABEL_HINT.search(html) is None:
        return ""  # the common case, without parsing the page a second time
    try:
        root = lxml.html.fromstring(shorten_huge_tags(html))  # a million attributes would take libxml2 hours
    except (ValueError, lxml.etree.LxmlError):  # an empty document; libxml2 out of memory
        return ""
    for anchor in root.iter("a"):
        href = (anchor.get("href") or "").strip()
        label = _SPACES.sub("", anchor.text_content() or "")
        if not href or label not in NEXT_LABELS:
            continue
        target = str(urldefrag(urljoin(page_url, href))[0])
        if _continues(page_url, target):
            return target
    return ""
