"""The meaning path's pure parts: sentences, languages and the monotone alignment, on synthetic vectors.

The alignment is tested here without the model: sentence vectors are drawn at random (unrelated sentences)
or copied with noise (a copy), which is what the model's vectors look like to the dynamic programme. The real
model runs in test_meaning_model.py.
"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fptrack.compare.meaning import (
    BRIDGE_SENTENCES,
    COVERAGE_MIN,
    EMBEDDING_DIM,
    _align_sentences,
    _covered,
    _Sentences,
    copy_kind,
    detect_language,
    split_sentences,
)

TEXT_PARTS = st.lists(
    st.sampled_from(
        ["却说悟空", "八戒道", "。", "！", "？”", "，", "\n\n", "\n", " ", "He said.", " Then", "!", "…"]
    ),
    max_size=60,
)


@settings(max_examples=200)
@given(TEXT_PARTS)
def test_sentences_are_in_order_trimmed_and_hold_every_letter(parts: list[str]) -> None:
    text = "".join(parts)
    spans = split_sentences(text)
    covered = np.zeros(len(text), dtype=bool)
    previous_end = 0
    for start, end in spans:
        assert previous_end <= start < end <= len(text)
        assert not text[start].isspace() and not text[end - 1].isspace()
        covered[start:end] = True
        previous_end = end
    assert all(covered[i] for i, ch in enumerate(text) if ch.isalnum())


def test_sentences_cut_on_chinese_and_latin_ends_with_their_quotes() -> None:
    text = "悟空道：“师父，此山必有妖怪！”行了多日，忽见一座高山。\n\nMr. Smith went home. He was very tired!"
    assert [text[s:e] for s, e in split_sentences(text)] == [
        "悟空道：“师父，此山必有妖怪！”",
        "行了多日，忽见一座高山。",
        "Mr. Smith went home.",
        "He was very tired!",
    ]


def test_text_without_punctuation_is_cut_into_sentences_of_bounded_length() -> None:
    text = "天地玄黄宇宙洪荒" * 100
    spans = split_sentences(text)
    assert len(spans) >= 5 and max(e - s for s, e in spans) <= 160
    assert "".join(text[s:e] for s, e in spans) == text


def test_languages_by_script() -> None:
    assert detect_language("却说那悟空与八戒辞了菩萨。") == "zh"
    assert detect_language("卻說那悟空與八戒辭了菩薩。") == "zh"
    assert detect_language("Monkey and Pigsy took leave of the Bodhisattva.") == "en"
    assert detect_language("Tôi là người Việt Nam và tôi yêu đất nước này.") == "vi"
    assert detect_language("Dia tidak akan pergi dengan orang yang itu dari sini.") == "id"
    assert detect_language("손오공은 저팔계와 함께 보살에게 작별을 고했다.") == "ko"
    assert detect_language("悟空は八戒と一緒に菩薩に別れを告げた。") == "ja"
    assert detect_language("เขาเดินทางไปทางทิศตะวันตก") == "th"
    assert detect_language("第一章 Chapter One 悟空出世，天地震动，众神惊慌。") == "zh"
    assert detect_language("123 ...") == "und"
    assert copy_kind("Monkey went west.", "zh") == "translation:en"
    assert copy_kind("悟空往西去了。", "zh") == "rewrite"


def _sentences(vectors: np.ndarray, weights: list[float] | None = None) -> _Sentences:
    n = len(vectors)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    spans = tuple((10 * i, 10 * i + 8) for i in range(n))
    lengths = np.asarray(weights if weights is not None else [20.0] * n)
    return _Sentences(spans, (vectors / norms).astype(np.float32), lengths, lengths)


def _random_vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    # e5's vectors share a large common part (similarities of unrelated sentences sit near 0.8)
    return 3.0 + rng.normal(size=(n, EMBEDDING_DIM)) + rng.normal(size=EMBEDDING_DIM)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 40), st.integers(1, 40), st.floats(0.0, 1.0))
def test_alignment_is_monotone_and_coverage_a_share(seed: int, m: int, n: int, copied: float) -> None:
    rng = np.random.default_rng(seed)
    chapter = _random_vectors(rng, n)
    page = _random_vectors(rng, m)
    # part of the page copies chapter sentences in order, with noise
    rows = np.sort(rng.choice(n, size=min(m, n), replace=False))
    for i, j in enumerate(rows):
        if rng.random() < copied:
            page[i] = chapter[j] + 0.3 * rng.normal(size=EMBEDDING_DIM)
    weights = rng.uniform(5, 60, size=n).tolist()
    alignment = _align_sentences(_sentences(page), _sentences(chapter, weights), "rewrite")
    assert 0.0 <= alignment.coverage <= 1.0 + 1e-9
    pairs = alignment.pairs
    for (p0, p1, c0, c1, sim), (q0, _, d0, _, _) in itertools.pairwise(pairs):
        assert p1 <= q0 and c1 <= d0  # in order on both sides, no overlap
    for p0, p1, c0, c1, sim in pairs:
        assert p0 < p1 and c0 < c1 and -1.0 <= sim <= 1.0 + 1e-6


SHORT_CHAPTER_SENTENCES = 48
"""Below this, chance steps can cover a chapter (random vectors with e5's common part, the test's own):
unrelated text covered a chapter of 8 sentences at COVERAGE_MIN or more for 33 seeds in 1,000, of 12 for
16, of 16-30 for 1-5, of 41-47 for 3 in 2,600 spread over 40-120 sentences, of 48-120 for none in 3,000.
Real chapters run to hundreds of sentences (docs/meaning-pipeline.md: short registered texts)."""


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10_000), st.integers(8, 120))
def test_a_copy_covers_the_chapter_and_unrelated_text_does_not(seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    chapter = _sentences(_random_vectors(rng, n))
    itself = _align_sentences(chapter, chapter, "rewrite")
    assert itself.coverage > 0.95 and len(itself.pairs) >= n - 1
    noisy = _sentences(chapter.vectors + 0.04 * rng.normal(size=chapter.vectors.shape))
    assert _align_sentences(noisy, chapter, "rewrite").coverage > 0.9
    if n >= SHORT_CHAPTER_SENTENCES:  # below, chance steps can cover a short chapter (docs/compare.md)
        unrelated = _sentences(_random_vectors(rng, n))
        assert _align_sentences(unrelated, chapter, "rewrite").coverage < COVERAGE_MIN


def test_a_short_page_cannot_stand_for_a_long_chapter() -> None:
    """One sentence as long as one chapter sentence covers at most a couple of them (the length bound)."""
    rng = np.random.default_rng(3)
    chapter_vectors = _random_vectors(rng, 30)
    summary = chapter_vectors[:3].mean(axis=0, keepdims=True)  # a synopsis leans on three sentences at once
    alignment = _align_sentences(_sentences(summary, [20.0]), _sentences(chapter_vectors), "rewrite")
    assert alignment.coverage <= 2 / 30 + 1e-9


def test_empty_sides_cover_nothing() -> None:
    rng = np.random.default_rng(1)
    empty = _Sentences((), np.empty((0, EMBEDDING_DIM), dtype=np.float32), np.empty(0), np.empty(0))
    chapter = _sentences(_random_vectors(rng, 5))
    assert _align_sentences(empty, chapter, "rewrite").coverage == 0.0
    assert _align_sentences(chapter, empty, "rewrite").coverage == 0.0


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10_000))
def test_a_translation_that_follows_the_chapter_loosely_is_covered_between_its_steps(seed: int) -> None:
    """A translation's sentences stand out against the chapter's only here and there (a short sentence in
    three), in order, the long ones between them merged or rephrased past recognition: the page still follows
    the chapter, so the chapter between its steps is covered (before the bridges: 0.16-0.27 of the letters,
    below COVERAGE_MIN)."""
    rng = np.random.default_rng(seed)
    chapter = _random_vectors(rng, 60)
    weights = [10.0 if j % 3 == 0 else 30.0 for j in range(60)]
    page = _random_vectors(rng, 60)
    for j in range(0, 60, 3):
        page[j] = chapter[j] + 0.3 * rng.normal(size=EMBEDDING_DIM)
    translation = _align_sentences(_sentences(page, weights), _sentences(chapter, weights), "translation:en")
    assert translation.coverage > 0.8 > COVERAGE_MIN
    assert len(translation.pairs) < 40  # the pairs shown are the aligned steps, not the bridged sentences
    unrelated = _align_sentences(
        _sentences(_random_vectors(rng, 60), weights), _sentences(chapter, weights), "x"
    )
    assert unrelated.coverage < COVERAGE_MIN


def test_bridges_span_short_gaps_on_both_sides_only() -> None:
    gap = BRIDGE_SENTENCES
    steps = [
        (0, 1, 0, 1, 0.9),
        (1 + gap, 1, 1 + gap, 1, 0.9),  # gap sentences skipped on both sides: bridged
        (3 + 2 * gap, 1, 3 + 2 * gap, 1, 0.9),  # one more on both sides: not bridged
        (4 + 2 * gap + 10, 1, 5 + 2 * gap, 1, 0.9),  # close in the chapter, far on the page: not bridged
    ]
    mask = _covered(steps, 8 + 2 * gap)
    assert mask[: 2 + gap].all()
    assert not mask[2 + gap : 3 + 2 * gap].any()
    assert mask[3 + 2 * gap] and not mask[4 + 2 * gap] and mask[5 + 2 * gap]
    assert not mask[6 + 2 * gap :].any()
