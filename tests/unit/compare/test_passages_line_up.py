"""Passages that line up: no two passages of an alignment claim the same characters of the page or of the
chapter, each page span is aligned with the chapter text it copies (its normalised texts agree up to the
edits ``span_diff`` reports), and a copy that differs only in what the matching ignores is ONE passage
without edits.

Run on every kind of copy the benchmarks make (``tests.support.copy_kinds``), on long chapters full of
repeated lines (what made anchors jump between diagonals)."""

from __future__ import annotations

import itertools
import random
from functools import cache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fptrack.compare.verify import align
from fptrack.fingerprint.normalize import NormalizedText, normalize
from fptrack.fingerprint.pinyin import pinyin_initials
from fptrack.services.evidence.passages import EvidenceSpan, span_diff
from tests.support.copy_kinds import EDITED_KINDS, VERBATIM_KINDS, body, long_chapter, page_of


@cache
def _chapter(seed: int) -> str:
    return long_chapter(seed, 10_500)


def _spans(page: str, chapter: str) -> list[tuple[int, int, int, int]]:
    """The passages as compare.service.verify makes them: align the normalised texts (both channels), map the
    runs back to the original texts."""
    page_norm, chapter_norm = normalize(page), normalize(chapter)
    alignment = align(
        page_norm.text, chapter_norm.text, pinyin_initials(page_norm.text), pinyin_initials(chapter_norm.text)
    )
    return [
        (*page_norm.original_span(p0, p1), *chapter_norm.original_span(c0, c1))
        for p0, p1, c0, c1 in alignment.runs
    ]


def _disjoint(ranges: list[tuple[int, int]]) -> bool:
    ordered = sorted(ranges)
    return all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(ordered))


def _unmarked(normalized: NormalizedText, base: int, edits: list[tuple[int, int]]) -> str:
    """The normalised characters of a passage whose original characters no reported edit covers."""
    covered = np.zeros(len(normalized), dtype=bool)
    originals = normalized.offsets + base
    for start, end in edits:
        covered |= (originals >= start) & (originals < end)
    return "".join(ch for ch, marked in zip(normalized.text, covered) if not marked)


def _check_passages(page: str, chapter: str, spans: list[tuple[int, int, int, int]]) -> list[float]:
    """The property: disjoint on both sides, and each passage's normalised texts equal once the edits it
    reports are taken out, with most of it unmarked. Returns each passage's unmarked share."""
    assert _disjoint([(s[0], s[1]) for s in spans]), spans
    assert _disjoint([(s[2], s[3]) for s in spans]), spans
    shares = []
    for number, (p0, p1, c0, c1) in enumerate(spans, start=1):
        diff = span_diff(page, chapter, EvidenceSpan(number, p0, p1, c0, c1))
        assert diff.compared
        page_norm, work_norm = normalize(page[p0:p1]), normalize(chapter[c0:c1])
        page_left = _unmarked(page_norm, p0, [(s, e) for s, e, _, _ in diff.page_edits])
        work_left = _unmarked(work_norm, c0, [(s, e) for s, e, _, _ in diff.work_edits])
        assert page_left == work_left, (number, p0, p1, c0, c1)
        shares.append(len(page_left) / max(len(page_norm), len(work_norm)))
    return shares


def test_a_long_verbatim_copy_with_repeated_lines_is_one_passage_without_edits() -> None:
    """The issue's case: a verbatim copy of a long chapter was recorded as four passages whose chapter ranges
    overlapped, and the side-by-side view showed edits inside it."""
    chapter = _chapter(7)
    assert len(chapter) > 10_000
    main = VERBATIM_KINDS["verbatim"](chapter, "", random.Random(0))
    page = page_of(main)
    spans = _spans(page, chapter)
    assert len(spans) == 1, spans
    ((p0, p1, c0, c1),) = spans
    first, last = body(chapter)[0], body(chapter)[-1]
    assert (p0, p1) == (page.index(first), page.index(last) + len(last) - 1)  # up to the last "。"
    assert (c0, c1) == (chapter.index(first), chapter.index(last) + len(last) - 1)
    assert span_diff(page, chapter, EvidenceSpan(1, p0, p1, c0, c1)).identical


@pytest.mark.parametrize("kind", sorted(VERBATIM_KINDS))
def test_a_copy_differing_only_in_what_matching_ignores_is_one_passage_without_edits(kind: str) -> None:
    chapter = _chapter(11)
    page = page_of(VERBATIM_KINDS[kind](chapter, "", random.Random(1)))
    spans = _spans(page, chapter)
    assert len(spans) == 1, spans
    diff = span_diff(page, chapter, EvidenceSpan(1, *spans[0]))
    assert diff.identical, (diff.changed, diff.inserted, diff.deleted)
    assert normalize(page[spans[0][0] : spans[0][1]]).text == normalize(chapter[spans[0][2] :]).text


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(
    kind=st.sampled_from(sorted({**VERBATIM_KINDS, **EDITED_KINDS})),
    seed=st.integers(0, 50),
    copy_seed=st.integers(0, 10_000),
)
def test_passages_never_overlap_and_line_up_on_every_kind_of_copy(
    kind: str, seed: int, copy_seed: int
) -> None:
    chapter, other = _chapter(seed), _chapter(seed + 100)
    make = {**VERBATIM_KINDS, **EDITED_KINDS}[kind]
    page = page_of(make(chapter, other, random.Random(copy_seed)))
    spans = _spans(page, chapter)
    shares = _check_passages(page, chapter, spans)
    assert all(share >= 0.5 for share in shares), (kind, shares)
    if kind in VERBATIM_KINDS:
        assert len(spans) == 1 and shares == [1.0]


def test_a_page_that_copies_a_stretch_twice_claims_it_once() -> None:
    chapter = _chapter(3)
    paragraphs = body(chapter)
    page = page_of("\n".join(paragraphs[:12] + paragraphs[8:20]))
    spans = _spans(page, chapter)
    _check_passages(page, chapter, spans)
    assert len(spans) >= 1


@pytest.mark.slow
@settings(max_examples=15, deadline=None, derandomize=True)
@given(seed=st.integers(0, 1000), start=st.integers(0, 3000), length=st.integers(300, 1500))
def test_a_verbatim_excerpt_of_kana_prose_is_one_passage_without_edits(
    seed: int, start: int, length: int
) -> None:
    """Generated kana prose repeats its 6-grams all over (a small vocabulary, no pinyin): the benchmark's
    ``kana_excerpt`` kind, which anchoring at first occurrences cut into several runs."""
    from testbed.kana import kana_prose

    chapter = kana_prose(random.Random(seed), 5000)
    excerpt = chapter[start : start + length]
    page = page_of(excerpt)
    spans = _spans(page, chapter)
    _check_passages(page, chapter, spans)
    assert len(spans) == 1, spans
    assert span_diff(page, chapter, EvidenceSpan(1, *spans[0])).identical
