"""Pure parts of compare: the boilerplate mask, licensed-site matching, the decision rule."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fptrack.compare.licensing import is_licensed, normalise_site
from fptrack.compare.scoring import (
    DEFAULT_RULE,
    DecisionRule,
    Evidence,
    candidate_rule_grid,
    decide_with,
    evidence_of,
)
from fptrack.compare.service import mask_from_positions
from fptrack.compare.verify import align
from fptrack.storage.sites import site_of as site_key


@given(
    length=st.integers(0, 300),
    positions=st.lists(st.integers(-5, 320), max_size=40),
    k=st.integers(1, 10),
    w=st.integers(1, 20),
)
def test_mask_covers_every_kgram_and_only_short_gaps(
    length: int, positions: list[int], k: int, w: int
) -> None:
    mask = mask_from_positions(length, positions, k, w)
    assert mask.shape == (length,)
    inside = sorted({p for p in positions if 0 <= p < length})
    for p in inside:
        assert mask[p : min(length, p + k)].all()
    # brute force: a character is masked iff it lies in a k-gram, or in a gap of at most w between neighbours
    expected = np.zeros(length, dtype=bool)
    for p in inside:
        expected[p : p + k] = True
    for a, b in itertools.pairwise(inside):
        if b - a <= w:
            expected[a:b] = True
    assert (mask == expected).all()


def test_site_key_keeps_the_port_and_folds_case() -> None:
    assert site_key("http://Example.COM:8080/a/b.html") == "example.com:8080"
    assert site_key("https://www.example.com/x") == "www.example.com"


@pytest.mark.parametrize(
    ("entry", "normalised"),
    [
        ("Example.com", "example.com"),
        ("https://WWW.example.com/path?q=1", "www.example.com"),
        ("127.0.0.1:8080", "127.0.0.1:8080"),
        ("http://127.0.0.1:8080/", "127.0.0.1:8080"),
    ],
)
def test_normalise_site(entry: str, normalised: str) -> None:
    assert normalise_site(entry) == normalised


@pytest.mark.parametrize("entry", ["", "  ", "http://", "example.com:notaport"])
def test_normalise_site_rejects_what_is_no_host(entry: str) -> None:
    with pytest.raises(ValueError, match="not a host"):
        normalise_site(entry)


def test_licensed_hosts_cover_subdomains_and_exact_ports_only() -> None:
    sites = ["example.com", "127.0.0.1:8080"]
    assert is_licensed("https://example.com/book/1.html", sites)
    assert is_licensed("https://m.example.com/book/1.html", sites)
    assert not is_licensed("https://badexample.com/book/1.html", sites)
    assert is_licensed("http://127.0.0.1:8080/a", sites)
    assert not is_licensed("http://127.0.0.1:8081/a", sites)
    assert not is_licensed("http://example.org/", sites)


def test_decision_rule_reads_the_evidence() -> None:
    rule = DecisionRule(min_copied=50, min_coverage=0.2, min_passage=200)
    assert not decide_with(Evidence(49, 1.0, 49), rule).flagged  # a quotation, however much of a tiny chapter
    assert decide_with(Evidence(600, 0.25, 150), rule).flagged  # a quarter of the chapter, in pieces
    assert not decide_with(Evidence(150, 0.05, 150), rule).flagged  # a few short passages of a long chapter
    assert decide_with(Evidence(250, 0.05, 250), rule).flagged  # one long excerpt
    assert DEFAULT_RULE in candidate_rule_grid()


def test_ignored_page_characters_never_align() -> None:
    chapter = "".join(chr(0x4E00 + (i * 7919) % 5000) for i in range(400))
    page = "序" * 10 + chapter[100:300] + "跋" * 10
    full = align(page, chapter)
    assert full.page_covered >= 190
    ignore = np.zeros(len(page), dtype=bool)
    ignore[:] = True
    assert align(page, chapter, ignore=ignore).page_covered == 0
    with pytest.raises(ValueError, match="ignore mask"):
        align(page, chapter, ignore=ignore[:-1])


def test_a_review_quoting_many_passages_is_sparse_and_a_copy_is_dense() -> None:
    chapter = "".join(chr(0x4E00 + (i * 7919) % 5000) for i in range(3000))
    comment = "".join(chr(0x6000 + (i * 31) % 900) for i in range(150))  # the reviewer's own words
    quotes = [chapter[start : start + 100] for start in range(0, 3000, 300)]  # ten passages of 100 characters
    review = comment.join(quotes)
    evidence = evidence_of(align(review, chapter))
    assert evidence.longest_run < 150 and evidence.chapter_coverage >= 0.15  # coverage alone would flag it
    assert evidence.density < 0.5 and not decide_with(evidence).flagged
    edited = "".join(ch if i % 9 else "改" for i, ch in enumerate(chapter[:600]))  # a dense, edited copy
    copy_evidence = evidence_of(align(edited, chapter))
    assert copy_evidence.density > 0.9 and decide_with(copy_evidence).flagged
    assert decide_with(Evidence(600, 0.25, 120, 0.3), DecisionRule(min_density=0.5)).flagged is False
    assert decide_with(Evidence(600, 0.25, 120, 0.9), DecisionRule(min_density=0.5)).flagged is True
