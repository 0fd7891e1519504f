"""Which stored pages a newly registered work compares again (compare.service.retro_candidates)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from fptrack.compare.service import RETRO_COMMON_TEXTS, retro_candidates


def _shared(**pages: list[int]) -> dict[int, np.ndarray]:
    return {int(name[1:]): np.array(sorted(codes), dtype=np.int64) for name, codes in pages.items()}


def test_pages_holding_two_codes_are_always_compared() -> None:
    shared = {page: np.array([1, 2]) for page in range(50)}
    assert retro_candidates(shared, {}) == list(range(50))


def test_a_code_a_few_texts_hold_alone_is_a_trace_of_a_copy() -> None:
    shared = _shared(p1=[7], p2=[7], p3=[9], p4=[1, 2, 3])
    assert retro_candidates(shared, {1: "a", 2: "b", 3: "c", 4: "d"}) == [1, 2, 3, 4]


def test_a_code_many_texts_hold_alone_is_a_common_phrase() -> None:
    many = RETRO_COMMON_TEXTS + 1
    shared = {page: np.array([5]) for page in range(many)} | {100: np.array([5, 6]), 101: np.array([8])}
    texts = {page: f"text{page}" for page in range(many)} | {101: "other"}
    # the page holding the phrase and another code is compared; so is a page whose one code is its own
    assert retro_candidates(shared, texts) == [100, 101]


def test_mirrors_of_one_text_count_once() -> None:
    """A pirate network serves one noised copy on many hosts: its pages hold the same one code, and are one
    text."""
    many = RETRO_COMMON_TEXTS + 3
    shared = {page: np.array([5]) for page in range(many)}
    assert retro_candidates(shared, {page: "same" for page in range(many)}) == list(range(many))


@given(
    st.dictionaries(
        st.integers(0, 200),
        st.lists(st.integers(-20, 20), min_size=1, max_size=4, unique=True),
        max_size=40,
    ),
    st.randoms(use_true_random=False),
)
def test_the_choice_depends_on_the_pages_alone(pages: dict[int, list[int]], rng) -> None:  # type: ignore[no-untyped-def]
    shared = {page: np.array(sorted(codes), dtype=np.int64) for page, codes in pages.items()}
    texts = {page: f"t{page % 7}" for page in pages}
    chosen = retro_candidates(shared, texts)
    order = list(shared.items())
    rng.shuffle(order)
    assert retro_candidates(dict(order), texts) == chosen
    # every page holding two codes, and no page holding none, is chosen; a page left out holds one code that
    # more than RETRO_COMMON_TEXTS texts hold alone
    assert {p for p, codes in pages.items() if len(codes) >= 2} <= set(chosen)
    for page in set(pages) - set(chosen):
        (code,) = pages[page]
        alone = {texts[p] for p, codes in pages.items() if codes == [code]}
        assert len(alone) > RETRO_COMMON_TEXTS
