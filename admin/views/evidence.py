"""Evidence shown to a reviewer: a text cut into plain and highlighted segments.

Pure functions, no Flask. The templates render each segment's text through Jinja's autoescape, so crawled text
can never become markup: we highlight by *splitting* the text, never by inserting tags into it.

Spans are ``[page_start, page_end, work_start, work_end]`` character offsets into ``Page.text`` and
``Work.text`` (see ``compare.records``). The work side is shown as the attributed chapter, which is
``Work.text[chapter.start:chapter.end]``, so work offsets are shifted by ``chapter.start`` and clipped to it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = [
    "EvidenceSpan",
    "Segment",
    "chapter_ranges",
    "evidence_spans",
    "highlight_segments",
    "is_web_url",
    "page_ranges",
]


@dataclass(frozen=True)
class Segment:
    """A run of text; ``span`` is the 1-based number of the copied span covering it, or ``None``.
    ``anchor`` is True on the first segment of each span (where the page puts the span's link target)."""

    text: str
    span: int | None = None
    anchor: bool = False


@dataclass(frozen=True)
class EvidenceSpan:
    """One copied passage, numbered from 1 in the order the match lists them."""

    number: int
    page_start: int
    page_end: int
    work_start: int
    work_end: int

    @property
    def length(self) -> int:
        return self.page_end - self.page_start


def evidence_spans(raw_spans: Iterable[Sequence[object]] | None) -> list[EvidenceSpan]:
    """Read the JSON spans of a match; malformed entries (wrong arity, non-integers, end < start) are skipped
    rather than trusted, since they come from a column that other code writes."""
    spans: list[EvidenceSpan] = []
    for raw in raw_spans or []:
        if not isinstance(raw, (list, tuple)) or len(raw) != 4:
            continue
        try:
            page_start, page_end, work_start, work_end = (_offset(value) for value in raw)
        except (TypeError, ValueError):
            continue
        if page_end < page_start or work_end < work_start:
            continue
        spans.append(EvidenceSpan(len(spans) + 1, page_start, page_end, work_start, work_end))
    return spans


def _offset(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"an offset must be an integer, got {value!r}")
    return int(value)


def page_ranges(spans: Iterable[EvidenceSpan]) -> list[tuple[int, int, int]]:
    """``(start, end, number)`` of each span in page-text offsets."""
    return [(s.page_start, s.page_end, s.number) for s in spans]


def chapter_ranges(spans: Iterable[EvidenceSpan], chapter_start: int) -> list[tuple[int, int, int]]:
    """``(start, end, number)`` of each span in offsets of the chapter text (work offsets minus
    ``chapter_start``); clipping to the chapter happens in :func:`highlight_segments`."""
    return [(s.work_start - chapter_start, s.work_end - chapter_start, s.number) for s in spans]


def highlight_segments(text: str, ranges: Iterable[tuple[int, int, int]]) -> list[Segment]:
    """Cut ``text`` into consecutive segments, marking the characters covered by ``ranges``.

    ``ranges`` are ``(start, end, number)`` half-open character ranges; they are clipped to the text, empty
    ones are ignored, and where ranges overlap the lowest number wins. The segments' texts concatenate back to
    ``text`` exactly, and adjacent segments never share the same mark.
    """
    length = len(text)
    clipped = sorted(
        (max(0, start), min(length, end), number)
        for start, end, number in ranges
        if min(length, end) > max(0, start)
    )
    if not clipped:
        return [Segment(text)] if text else []
    boundaries = sorted({0, length, *(s for s, _, _ in clipped), *(e for _, e, _ in clipped)})
    segments: list[Segment] = []
    anchored: set[int] = set()
    for left, right in itertools.pairwise(boundaries):
        covering = [number for start, end, number in clipped if start <= left and right <= end]
        mark = min(covering) if covering else None
        piece = text[left:right]
        if segments and segments[-1].span == mark:
            previous = segments[-1]
            segments[-1] = Segment(previous.text + piece, mark, previous.anchor)
        else:
            anchor = mark is not None and mark not in anchored
            if anchor:
                anchored.add(mark)  # type: ignore[arg-type]
            segments.append(Segment(piece, mark, anchor))
    return segments


def is_web_url(url: object) -> bool:
    """True only for a plain ``http``/``https`` URL with a host and no whitespace or control characters:
    anything else (``javascript:``, ``data:``, tricks with embedded newlines) is shown as text, not a link."""
    if not isinstance(url, str) or not url:
        return False
    if any(ord(char) <= 0x20 or ord(char) == 0x7F for char in url):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
