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

__all__ = ["ChapterSpan", "split_chapters"]

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


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:80]
    return ""


def _is_cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)
