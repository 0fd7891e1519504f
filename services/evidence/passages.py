"""Evidence shown to a reviewer: a text cut into plain and highlighted segments.

Pure functions, no Flask. The templates render each segment's text through Jinja's autoescape, so crawled text
can never become markup: we highlight by *splitting* the text, never by inserting tags into it.

Inside each copied passage the differences are marked too (:func:`span_diff`): a character-level diff
(``difflib.SequenceMatcher``) of the page's span against the work's span, both NORMALISED as the matching
compares them (``fingerprint.normalize``: indentation, whitespace and punctuation dropped, Traditional folded
to Simplified, full width to half), gives the characters the copy *changed*, the ones it *inserted* (on the
page, not in the work) and the ones it *deleted* (in the work, missing from the page), mapped back onto the
original characters through the normaliser's offset maps; each side shows its own characters with their class,
and a gap marker where the other side has characters this one lacks. A copy that differs from the work only in
what the matching ignores (a re-indented, re-punctuated or Traditional-script copy) shows no edit. Still by
splitting: a highlighted segment carries :class:`Part` pieces, each escaped on its own.

Spans are ``[page_start, page_end, work_start, work_end]`` character offsets into ``Page.text`` and
``Work.text`` (see ``compare.records``). The work side is shown as the attributed chapter, which is
``Work.text[chapter.start:chapter.end]``, so work offsets are shifted by ``chapter.start`` and clipped to it.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import numpy as np

from fptrack.fingerprint.normalize import NormalizedText, normalize

__all__ = [
    "MAX_DIFF_LENGTH",
    "EvidenceSpan",
    "Part",
    "Segment",
    "SpanDiff",
    "chapter_ranges",
    "evidence_spans",
    "highlight_segments",
    "is_web_url",
    "page_ranges",
    "quote_pair",
    "span_diff",
]

# Spans longer than this (characters, on either side) are highlighted without a character diff: the diff is
# quadratic at worst and a reviewer reads a passage, not a book.
MAX_DIFF_LENGTH = 20_000


@dataclass(frozen=True)
class Part:
    """A piece of a highlighted segment: ``edit`` is None (the same on both sides), ``"changed"``,
    ``"inserted"`` (only on the page) or ``"deleted"`` (only in the work). ``gap`` > 0 marks a point (empty
    ``text``) where the other side has ``gap`` characters that this side lacks."""

    text: str
    edit: str | None = None
    gap: int = 0


@dataclass(frozen=True)
class Segment:
    """A run of text; ``span`` is the 1-based number of the copied span covering it, or ``None``.
    ``anchor`` is True on the first segment of each span (where the page puts the span's link target)."""

    text: str
    span: int | None = None
    anchor: bool = False
    parts: tuple[Part, ...] = field(default=())


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


@dataclass(frozen=True)
class SpanDiff:
    """The character differences inside one copied passage.

    ``page_edits`` are ``(start, end, number, kind)`` in page offsets (kind ``changed`` or ``inserted``),
    ``work_edits`` the same in work offsets (``changed`` or ``deleted``); ``page_gaps`` are ``(position,
    number, length, kind)`` points of the page where ``length`` work characters are missing (kind
    ``deleted``), ``work_gaps`` the points of the work where the page inserted characters (kind ``inserted``).
    ``compared`` is False when the passage was too long to diff (:data:`MAX_DIFF_LENGTH`).
    """

    number: int
    changed: int = 0
    inserted: int = 0
    deleted: int = 0
    compared: bool = True
    page_edits: tuple[tuple[int, int, int, str], ...] = ()
    work_edits: tuple[tuple[int, int, int, str], ...] = ()
    page_gaps: tuple[tuple[int, int, int, str], ...] = ()
    work_gaps: tuple[tuple[int, int, int, str], ...] = ()

    @property
    def identical(self) -> bool:
        return self.compared and not (self.changed or self.inserted or self.deleted)


def span_diff(page_text: str, work_text: str, span: EvidenceSpan) -> SpanDiff:
    """Diff the page's characters ``[page_start, page_end)`` against the work's ``[work_start, work_end)``, as
    the matching compares them: both sides normalised (:func:`fingerprint.normalize.normalize`).

    ``difflib.SequenceMatcher`` (Ratcliff/Obershelp longest matching blocks, ``autojunk`` off: in Chinese
    prose the common characters are the text, not noise) turns the normalised page span into the normalised
    work span with ``replace`` (changed on both sides), ``delete`` (page characters the work lacks: inserted
    by the copier) and ``insert`` (work characters the page lacks: deleted by the copier) operations. Counts
    are in normalised characters; each edit is marked on the original characters it came from (with whatever
    the normaliser dropped between them), each gap before the original character that follows it."""
    page = page_text[span.page_start : span.page_end]
    work = work_text[span.work_start : span.work_end]
    if len(page) > MAX_DIFF_LENGTH or len(work) > MAX_DIFF_LENGTH:
        return SpanDiff(span.number, compared=False)
    page_norm, work_norm = normalize(page), normalize(work)
    page_edits: list[tuple[int, int, int, str]] = []
    work_edits: list[tuple[int, int, int, str]] = []
    page_gaps: list[tuple[int, int, int, str]] = []
    work_gaps: list[tuple[int, int, int, str]] = []
    changed = inserted = deleted = 0
    p0, w0, n = span.page_start, span.work_start, span.number
    matcher = difflib.SequenceMatcher(None, page_norm.text, work_norm.text, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "replace":
            changed += i2 - i1
            page_edits.append((*_original(page_norm, p0, i1, i2), n, "changed"))
            work_edits.append((*_original(work_norm, w0, j1, j2), n, "changed"))
        elif tag == "delete":
            inserted += i2 - i1
            page_edits.append((*_original(page_norm, p0, i1, i2), n, "inserted"))
            work_gaps.append((_point(work_norm, w0, j1), n, i2 - i1, "inserted"))
        elif tag == "insert":
            deleted += j2 - j1
            work_edits.append((*_original(work_norm, w0, j1, j2), n, "deleted"))
            page_gaps.append((_point(page_norm, p0, i1), n, j2 - j1, "deleted"))
    return SpanDiff(
        n,
        changed,
        inserted,
        deleted,
        True,
        tuple(page_edits),
        tuple(work_edits),
        tuple(page_gaps),
        tuple(work_gaps),
    )


def quote_pair(page_text: str, work_text: str, span: EvidenceSpan, limit: int) -> tuple[str, str]:
    """(original, copy): the work's and the page's text of one passage, for quoting side by side (a notice's
    原文 and 侵权内容), each cut to about ``limit`` characters with "…" AT THE SAME PLACE of the text: the cut
    falls on the longer side at ``limit`` and on the other side where the normalised diff (as in
    :func:`span_diff`) puts the same point, so the two columns always quote the same stretch of text."""
    copy = page_text[max(0, span.page_start) : max(0, span.page_end)]
    original = work_text[max(0, span.work_start) : max(0, span.work_end)]
    if len(copy) <= limit and len(original) <= limit:
        return original, copy
    window = 3 * limit  # the cut lies in there: no need to diff a whole chapter for it
    page_norm, work_norm = normalize(copy[:window]), normalize(original[:window])
    page_first = len(copy) >= len(original)
    cut_norm, other_norm = (page_norm, work_norm) if page_first else (work_norm, page_norm)
    kept = int(np.searchsorted(cut_norm.offsets, limit))  # normalised characters before the cut
    matched = _corresponding(cut_norm.text, other_norm.text, kept)
    other_cut = int(other_norm.offsets[matched]) if matched < len(other_norm) else window
    cuts = (limit, other_cut) if page_first else (other_cut, limit)
    copy_cut, original_cut = cuts
    return _cut(original, original_cut), _cut(copy, copy_cut)


def _cut(text: str, end: int) -> str:
    return text if end >= len(text) else text[:end] + "…"


def _corresponding(left: str, right: str, position: int) -> int:
    """The position of ``right`` that normalised ``position`` of ``left`` corresponds to (difflib's
    opcodes, as :func:`span_diff` reads them)."""
    matcher = difflib.SequenceMatcher(None, left, right, autojunk=False)
    for _tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if i1 <= position < i2 or (position == i2 == len(left)):
            return j1 + min(position - i1, j2 - j1)
    return len(right)


def _original(normalized: NormalizedText, base: int, start: int, end: int) -> tuple[int, int]:
    """The original characters (offsets from ``base``) that normalised ``[start, end)`` came from."""
    first, last = normalized.original_span(start, end)
    return base + first, base + last


def _point(normalized: NormalizedText, base: int, position: int) -> int:
    """Where a gap before normalised ``position`` stands in the original: before the original character it
    came from (after the last one at the end)."""
    if position < len(normalized):
        return base + int(normalized.offsets[position])
    return base + (int(normalized.offsets[-1]) + 1 if len(normalized) else 0)


def highlight_segments(
    text: str,
    ranges: Iterable[tuple[int, int, int]],
    edits: Iterable[tuple[int, int, int, str]] = (),
    gaps: Iterable[tuple[int, int, int, str]] = (),
) -> list[Segment]:
    """Cut ``text`` into consecutive segments, marking the characters covered by ``ranges``.

    ``ranges`` are ``(start, end, number)`` half-open character ranges; they are clipped to the text, empty
    ones are ignored, and where ranges overlap the lowest number wins. The segments' texts concatenate back to
    ``text`` exactly, and adjacent segments never share the same mark.

    ``edits`` (``(start, end, number, kind)``) and ``gaps`` (``(position, number, length, kind)``) of span
    ``number`` cut that span's highlighted segments further into :class:`Part` pieces (see
    :func:`span_diff`); a segment without edits or gaps has no parts.
    """
    segments = _span_segments(text, ranges)
    edits_by_span: dict[int, list[tuple[int, int, str]]] = {}
    for start, end, number, kind in edits:
        edits_by_span.setdefault(number, []).append((start, end, kind))
    gaps_by_span: dict[int, list[tuple[int, int, str]]] = {}
    for position, number, length, kind in gaps:
        if length > 0:
            gaps_by_span.setdefault(number, []).append((position, length, kind))
    if not edits_by_span and not gaps_by_span:
        return segments
    result: list[Segment] = []
    offset = 0
    for segment in segments:
        start, end = offset, offset + len(segment.text)
        offset = end
        if segment.span is None or (segment.span not in edits_by_span and segment.span not in gaps_by_span):
            result.append(segment)
            continue
        parts = _parts(
            text, start, end, edits_by_span.get(segment.span, []), gaps_by_span.get(segment.span, [])
        )
        result.append(Segment(segment.text, segment.span, segment.anchor, parts))
    return result


def _parts(
    text: str, start: int, end: int, edits: list[tuple[int, int, str]], gaps: list[tuple[int, int, str]]
) -> tuple[Part, ...]:
    kinds: list[str | None] = [None] * (end - start)
    for edit_start, edit_end, kind in edits:
        for position in range(max(start, edit_start), min(end, edit_end)):
            kinds[position - start] = kind
    gaps_at: dict[int, list[tuple[int, str]]] = {}
    for position, length, kind in gaps:
        if start <= position <= end:
            gaps_at.setdefault(position, []).append((length, kind))
    parts: list[Part] = []
    run_start = start
    for position in range(start, end + 1):
        at_end = position == end
        boundary = (
            at_end
            or position in gaps_at
            or (position > run_start and kinds[position - start] != kinds[run_start - start])
        )
        if boundary and position > run_start:
            parts.append(Part(text[run_start:position], kinds[run_start - start]))
            run_start = position
        for length, kind in gaps_at.get(position, []):
            parts.append(Part("", kind, gap=length))
    return tuple(parts)


def _span_segments(text: str, ranges: Iterable[tuple[int, int, int]]) -> list[Segment]:
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
