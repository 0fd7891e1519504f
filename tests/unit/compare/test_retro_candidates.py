"""Which stored pages a newly registered work compares again (compare.service.retro_candidates)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from fptrack.compare.service import RETRO_COMMON_TEXTS, RETRO_SITE_TEMPLATE_TEXTS, retro_candidates


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


def test_a_code_many_texts_of_one_site_hold_is_its_template() -> None:
    """A sidebar quoting the work on every page: those pages are not candidates, the site's copy (holding its
    chapter's codes besides) and the same quote on another site are."""
    many = RETRO_SITE_TEMPLATE_TEXTS + 1
    shared = {page: np.array([1, 2, 3]) for page in range(many)} | {
        500: np.array([1, 2, 3, 40, 41]),
        600: np.array([1, 2, 3]),
    }
    texts = {page: f"text{page}" for page in shared}
    sites = {page: 7 for page in shared} | {600: 8}
    assert retro_candidates(shared, texts, sites) == [500, 600]
    # without sites (pages stored before sites existed), every page is compared, as before
    assert retro_candidates(shared, texts) == sorted(shared)


def test_one_text_under_many_urls_of_a_site_is_never_its_template() -> None:
    """Desktop, mobile, print...: one copy served at many URLs of one site is one text."""
    many = RETRO_SITE_TEMPLATE_TEXTS + 10
    shared = {page: np.array([1, 2, 3]) for page in range(many)}
    assert retro_candidates(shared, dict.fromkeys(shared, "one copy"), dict.fromkeys(shared, 7)) == sorted(
        shared
    )


@given(
    st.dictionaries(
        st.integers(0, 300),
        st.tuples(st.integers(0, 2), st.lists(st.integers(0, 6), min_size=1, max_size=4, unique=True)),
        max_size=160,
    ),
    st.randoms(use_true_random=False),
)
def test_a_page_left_out_as_template_holds_only_codes_many_texts_of_its_site_hold(pages, rng) -> None:  # type: ignore[no-untyped-def]
    shared = {page: np.array(sorted(codes), dtype=np.int64) for page, (_, codes) in pages.items()}
    sites = {page: site for page, (site, _) in pages.items()}
    texts = {page: f"t{page % 97}" for page in pages}
    chosen = retro_candidates(shared, texts, sites)
    order = list(shared.items())
    rng.shuffle(order)
    assert retro_candidates(dict(order), texts, sites) == chosen
    for page in set(pages) - set(chosen):
        site, codes = pages[page]
        kept = [
            code
            for code in codes
            if len({texts[p] for p, (s, c) in pages.items() if s == site and code in c})
            <= RETRO_SITE_TEMPLATE_TEXTS
        ]
        # left out: nothing but template codes, or one code that more than RETRO_COMMON_TEXTS texts hold alone
        assert len(kept) <= 1
