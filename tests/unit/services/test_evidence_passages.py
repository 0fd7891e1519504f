"""The pure half of the evidence view: cutting texts into highlighted segments, reading spans, safe URLs."""

from __future__ import annotations

import itertools
import random

from hypothesis import given
from hypothesis import strategies as st

from fptrack.fingerprint.normalize import normalize
from fptrack.services.evidence.passages import (
    EvidenceSpan,
    Segment,
    chapter_ranges,
    evidence_spans,
    highlight_segments,
    is_web_url,
    page_ranges,
    quote_pair,
    span_diff,
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


def _whole(page: str, work: str) -> EvidenceSpan:
    return EvidenceSpan(1, 0, len(page), 0, len(work))


def test_indentation_whitespace_and_punctuation_are_no_edits() -> None:
    """A registered text indented with "　　" against an unindented copy showed "248 deleted / 118 deleted"
    at the start of every line: the matching ignores indentation, so the side-by-side view does too."""
    work = "　　王进道：“小人不敢。”\n　　众人都道：“好！”\n　　雨还在下。"
    page = '王进道:"小人不敢." 众人都道：“好！” 雨还在下'
    diff = span_diff(page, work, _whole(page, work))
    assert diff.identical
    assert not (diff.page_edits or diff.work_edits or diff.page_gaps or diff.work_gaps)


def test_traditional_script_and_full_width_are_no_edits() -> None:
    work = "灯塔的光照在海面上，老人说：“我知道了。”第12章"
    page = "燈塔的光照在海面上，老人說：「我知道了。」第１２章"
    assert span_diff(page, work, _whole(page, work)).identical


def test_real_edits_are_marked_on_the_original_characters() -> None:
    work = "　　灯塔的光照在海面上。\n　　老人叹了口气。"
    page = "燈塔的光照在湖面上。老人叹了一口气。"
    diff = span_diff(page, work, _whole(page, work))
    assert (diff.changed, diff.inserted, diff.deleted) == (1, 1, 0)
    assert [(page[s:e], kind) for s, e, _, kind in diff.page_edits] == [("湖", "changed"), ("一", "inserted")]
    assert [(work[s:e], kind) for s, e, _, kind in diff.work_edits] == [("海", "changed")]
    ((position, _, length, kind),) = diff.work_gaps
    assert (work[position], length, kind) == ("口", 1, "inserted")


def test_a_deletion_gap_stands_before_the_next_original_character() -> None:
    work = "老人叹了一口气，说道。"
    page = "老人叹了口气，说道。"
    diff = span_diff(page, work, EvidenceSpan(1, 0, len(page), 0, len(work)))
    assert diff.deleted == 1 and [(work[s:e]) for s, e, _, _ in diff.work_edits] == ["一"]
    ((position, _, length, _),) = diff.page_gaps
    assert (page[position], length) == ("口", 1)


def test_quoted_columns_are_cut_at_the_same_place_of_the_text() -> None:
    """A notice quotes each passage's 原文 and 侵权内容 cut to a limit: cut at the same character count, an
    indented original and an unindented copy (or one with ads) quoted different text in the two columns."""
    lines = [f"第{i}段，老人叹了口气，说道：“也罢，明日再修灯塔。”" for i in range(60)]
    work = "\n".join("\u3000\u3000" + line for line in lines)
    page = "".join(line + ("本站广告" if i % 7 == 3 else "") for i, line in enumerate(lines))
    span = EvidenceSpan(1, 0, len(page), 0, len(work))
    original, copy = quote_pair(page, work, span, 600)
    assert original.endswith("…") and copy.endswith("…")
    assert max(len(original), len(copy)) == 601
    assert normalize(original[:-1]).text.endswith(normalize(copy[:-1]).text[-20:])
    assert normalize(original[:-1]).text == normalize(copy[:-1].replace("本站广告", "")).text
    short_work, short_page = work[:300], page[:250]
    assert quote_pair(short_page, short_work, EvidenceSpan(1, 0, 250, 0, 300), 600) == (
        short_work,
        short_page,
    )


@given(st.integers(0, 10_000), st.integers(50, 400))
def test_quoted_columns_agree_on_a_verbatim_copy_whatever_the_layout(seed: int, limit: int) -> None:
    rng = random.Random(seed)
    sentences = ["灯塔的光照在海面上。", "“你说什么？”", "老人叹了口气。", "雨还在下，", "他点了点头。"]
    work = "".join(
        ("\n\u3000\u3000" if rng.random() < 0.3 else "") + rng.choice(sentences) for _ in range(200)
    )
    page = work.replace("\u3000", "").replace("\n", " ")
    original, copy = quote_pair(page, work, EvidenceSpan(1, 0, len(page), 0, len(work)), limit)
    assert normalize(original.rstrip("…")).text == normalize(copy.rstrip("…")).text
