"""The pure half of the evidence view: cutting texts into highlighted segments, reading spans, safe URLs."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from fptrack.services.evidence.passages import (
    EvidenceSpan,
    Segment,
    chapter_ranges,
    evidence_spans,
    highlight_segments,
    is_web_url,
    page_ranges,
)

ranges_strategy = st.lists(st.tuples(st.integers(-5, 60), st.integers(-5, 60), st.integers(1, 6)), max_size=6)


def test_highlight_marks_exactly_the_ranges() -> None:
    segments = highlight_segments("abcdefghij", [(2, 4, 1), (6, 9, 2)])
    assert segments == [
        Segment("ab"),
        Segment("cd", 1, anchor=True),
        Segment("ef"),
        Segment("ghi", 2, anchor=True),
        Segment("j"),
    ]


def test_overlapping_ranges_lowest_number_wins_and_anchor_once() -> None:
    segments = highlight_segments("0123456789", [(1, 8, 2), (3, 5, 1)])
    assert [(s.text, s.span, s.anchor) for s in segments] == [
        ("0", None, False),
        ("12", 2, True),
        ("34", 1, True),
        ("567", 2, False),
        ("89", None, False),
    ]


def test_ranges_outside_the_text_are_clipped_or_dropped() -> None:
    assert highlight_segments("abc", [(-3, 1, 1), (2, 99, 2), (5, 9, 3), (2, 2, 4)]) == [
        Segment("a", 1, anchor=True),
        Segment("b"),
        Segment("c", 2, anchor=True),
    ]
    assert highlight_segments("", [(0, 3, 1)]) == []
    assert highlight_segments("abc", []) == [Segment("abc")]


@given(st.text(max_size=50), ranges_strategy)
def test_segments_rebuild_the_text_and_mark_the_union(text: str, ranges: list[tuple[int, int, int]]) -> None:
    segments = highlight_segments(text, ranges)
    assert "".join(s.text for s in segments) == text
    assert all(s.text for s in segments)
    assert all(a.span != b.span for a, b in itertools.pairwise(segments))
    marked: list[int | None] = []
    for segment in segments:
        marked.extend([segment.span] * len(segment.text))
    for position in range(len(text)):
        covering = [n for start, end, n in ranges if start <= position < end]
        assert marked[position] == (min(covering) if covering else None)
    anchors = [s.span for s in segments if s.anchor]
    assert sorted(anchors) == sorted({s.span for s in segments if s.span is not None})


def test_evidence_spans_skip_malformed_entries_and_number_the_rest() -> None:
    spans = evidence_spans([[0, 5, 10, 15], [1, 2, 3], "x", [4, 2, 0, 1], [7, "9", 20, 22], [1, None, 2, 3]])
    assert spans == [EvidenceSpan(1, 0, 5, 10, 15), EvidenceSpan(2, 7, 9, 20, 22)]
    assert evidence_spans(None) == []
    assert page_ranges(spans) == [(0, 5, 1), (7, 9, 2)]
    assert chapter_ranges(spans, chapter_start=10) == [(0, 5, 1), (10, 12, 2)]


def test_only_plain_http_urls_are_links() -> None:
    assert is_web_url("http://pirate.example/book/1.html")
    assert is_web_url("HTTPS://pirate.example/")
    for hostile in (
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        " javascript:alert(1)",
        "java\nscript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "http:///no-host",
        "//pirate.example/",
        "http://pirate.example/a b",
        "",
        None,
    ):
        assert not is_web_url(hostile), hostile
