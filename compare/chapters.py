"""Split a registered text into chapters from its headings.

Recognised headings, each on a line of its own (optionally followed by a title on the same line):
``第十二回 …``, ``第3章``, ``第一节``, ``第二卷`` (Chinese numerals, Arabic or full-width digits), ``楔子``,
``序章``, ``引子``, ``尾声``, ``番外``, and ``Chapter 12`` / ``CHAPTER XII`` in Latin text. Text before the
first heading becomes chapter 0 ("front matter") when it holds at least ``MIN_FRONT_MATTER`` word characters
(a title and an author line are not a chapter); a text without headings is one chapter. A heading with no text
under it (a volume title followed at once by its first chapter) is folded into the next chapter's title (at
most ``MAX_TITLE_CHARS`` of them), so every chapter has a body."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["BOOK_MIN_CHARS", "WINDOW_CHARS", "ChapterSpan", "book_segments", "split_chapters"]

_NUMERAL = r"[0-9０-９一二三四五六七八九十百千万零〇两壹贰叁肆伍陆柒捌玖拾佰仟]+"
HEADING = re.compile(
    r"^[ \t\u3000]*(?:"
    rf"第{_NUMERAL}[章回节節卷集篇部](?:[ \t\u3000:：、.·]*[^\n]{{0,60}})?"
    r"|(?:楔子|序章|序言|引子|尾声|尾聲|后记|後記|番外)[^\n]{0,40}"
    r"|(?:chapter|CHAPTER|Chapter)[ \t]+(?:\d+|[IVXLCDM]+)\b[^\n]{0,80}"
    r")[ \t\u3000]*$",
    re.MULTILINE,
)
_HAS_WORDS = re.compile(r"\w")
_WORD = re.compile(r"\w")
MIN_FRONT_MATTER = 100
MAX_TITLE_CHARS = 500  # as long as a stored chapter title
BOOK_MIN_CHARS = 12_000
"""A page at least this long may hold many chapters (a whole book downloaded as one file): it is compared
chapter by chapter too (:func:`book_segments`). A chapter page is shorter and pays nothing."""
WINDOW_CHARS = 20_000
"""A part of a book without headings (or one longer than this) is compared in windows of this many characters,
each starting half a window after the last: every passage of half a window lies whole in one of them."""


@dataclass(frozen=True)
class ChapterSpan:
    """Chapter ``index`` with ``title`` is ``text[start:end]`` of the whole work."""

    index: int
    title: str
    start: int
    end: int


def split_chapters(text: str, *, default_title: str = "") -> list[ChapterSpan]:
    """Chapters of ``text`` in order; offsets are character offsets into ``text``; never empty for
    a text with any words in it."""
    headings = list(HEADING.finditer(text))
    if not headings:
        return (
            [ChapterSpan(1, default_title or _first_line(text), 0, len(text))]
            if _HAS_WORDS.search(text)
            else []
        )

    spans: list[ChapterSpan] = []
    front = text[: headings[0].start()]
    if sum(1 for _ in zip(range(MIN_FRONT_MATTER), _WORD.finditer(front))) >= MIN_FRONT_MATTER:
        spans.append(ChapterSpan(0, "前言" if _is_cjk(front) else "Front matter", 0, headings[0].start()))

    pending_title = ""
    pending_start: int | None = None
    number = 0
    for position, heading in enumerate(headings):
        end = headings[position + 1].start() if position + 1 < len(headings) else len(text)
        title = heading.group(0).strip(" \t\u3000")
        body = text[heading.end() : end]
        start = heading.start() if pending_start is None else pending_start
        if not _HAS_WORDS.search(body) and position + 1 < len(headings):
            # capped: a run of a hundred thousand empty headings must not build a title of them all
            # (quadratic)
            pending_title = f"{pending_title} {title}".strip()[:MAX_TITLE_CHARS]
            pending_start = start
            continue
        number += 1
        spans.append(ChapterSpan(number, f"{pending_title} {title}".strip(), start, end))
        pending_title, pending_start = "", None
    return spans


def book_segments(text: str) -> list[tuple[int, int]]:
    """The parts of a long page compared one by one, as ``(start, end)`` character offsets into ``text``: its
    chapters by their headings (:func:`split_chapters`, the splitter of registered works), a chapter longer
    than :data:`WINDOW_CHARS` (or the whole text, when it has no headings) in overlapping windows. Empty for a
    text shorter than :data:`BOOK_MIN_CHARS`: it is compared whole, as every page is.

    A registered chapter of at most half a window that the text holds under a heading, or not, lies whole in
    one segment; compared alone, it is one of a segment's few candidates instead of one of a whole book's
    hundreds (the index keeps a page's best few candidates: a book compared whole found only some of its
    chapters)."""
    if len(text) < BOOK_MIN_CHARS:
        return []
    segments: list[tuple[int, int]] = []
    step = WINDOW_CHARS // 2
    for span in split_chapters(text) or [ChapterSpan(1, "", 0, len(text))]:
        if span.end - span.start <= WINDOW_CHARS:
            segments.append((span.start, span.end))
            continue
        start = span.start
        while True:
            end = min(start + WINDOW_CHARS, span.end)
            segments.append((start, end))
            if end >= span.end:
                break
            start += step
    return segments


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:80]
    return ""


def _is_cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)
