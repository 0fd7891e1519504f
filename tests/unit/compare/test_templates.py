"""The site-template rule (pure): a function of the set of pages, never of their order."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fptrack.compare.templates import SITE_MIN_TEXTS, _by_code, _held, site_template_codes

TEMPLATE = list(range(1000, 1030))
EDGES = [-(2**31), 2**31 - 1, -(2**31) - 1, 2**31, 2**40, -(2**62)]


def _page(rng: np.random.Generator, own: int, *, template: bool) -> np.ndarray:
    codes = rng.integers(10**6, 10**12, size=own)
    return np.concatenate([codes, TEMPLATE]) if template else codes


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 12), st.integers(0, 8), st.permutations(range(20)))
def test_the_template_does_not_depend_on_page_order(
    seed: int, with_template: int, mirrors: int, order: list[int]
) -> None:
    rng = np.random.default_rng(seed)
    pages = {f"http://s/{n}": _page(rng, 100, template=n < with_template) for n in range(12)}
    chapter = rng.integers(10**6, 10**12, size=150)
    for n in range(mirrors):  # one chapter under several URLs, each with a little of its own
        pages[f"http://s/m{n}"] = np.concatenate([chapter, rng.integers(10**6, 10**12, size=10)])
    urls = list(pages)
    shuffled = {urls[i]: pages[urls[i]] for i in order if i < len(urls)}
    shuffled.update({u: pages[u] for u in urls if u not in shuffled})
    found = site_template_codes(shuffled)
    assert found == site_template_codes(pages)
    assert found == (set(TEMPLATE) if with_template >= SITE_MIN_TEXTS else set())


def test_a_chapter_under_many_urls_is_never_template() -> None:
    rng = np.random.default_rng(1)
    chapter = rng.integers(10**6, 10**12, size=300)
    pages = {
        f"http://s/{kind}/1": np.concatenate([chapter, rng.integers(10**6, 10**12, size=20)])
        for kind in ("www", "m", "print", "amp", "wap", "txt", "old", "bak")
    }
    assert site_template_codes(pages) == set()


def test_a_short_page_quoting_the_template_does_not_hide_it() -> None:
    """A page that is mostly the template text is not a version of every page carrying the template."""
    rng = np.random.default_rng(2)
    pages = {f"http://s/{n}": _page(rng, 90, template=True) for n in range(7)}
    pages["http://s/a-short-one"] = np.concatenate([TEMPLATE, rng.integers(10**6, 10**12, size=8)])
    assert site_template_codes(pages) == set(TEMPLATE)


def _template_by_definition(code_sets: dict[str, list[int]], min_texts: int, share: float) -> set[int]:
    """The rule as the docstring states it, code by code: holders in URL order, grouped greedily, a code is
    template when ``min_texts`` of its holders are pairwise not versions of one text."""
    urls = sorted(code_sets)
    sets = [set(code_sets[url]) for url in urls]
    if len(sets) < min_texts:
        return set()

    def one_text(a: int, b: int) -> bool:
        return len(sets[a] & sets[b]) > share * max(len(sets[a]), len(sets[b]))

    template = set()
    for code in set().union(*sets):
        texts: list[int] = []
        for holder in (i for i, held in enumerate(sets) if code in held):
            if not any(one_text(holder, other) for other in texts):
                texts.append(holder)
        if len(texts) >= min_texts:
            template.add(code)
    return template


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(
        st.text("abcdefgh", min_size=1, max_size=3),
        # few codes: shared, repeated, unsorted, signed; now and then the edges of 32 bits (template keys,
        # sorted with their holder in one number) or past them (the other sort)
        st.lists(st.integers(-40, 40) | st.sampled_from(EDGES), max_size=30),
        max_size=14,
    ),
    st.integers(2, 6),
    st.sampled_from([0.3, 0.5, 0.8]),
)
def test_the_template_is_the_rule_applied_code_by_code(
    code_sets: dict[str, list[int]], min_texts: int, share: float
) -> None:
    arrays = {url: np.array(codes, dtype=np.int64) for url, codes in code_sets.items()}
    found = site_template_codes(arrays, min_texts=min_texts, duplicate_share=share)
    assert found == _template_by_definition(code_sets, min_texts, share)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.lists(st.integers(-50, 50) | st.sampled_from(EDGES), max_size=20, unique=True), max_size=8)
)
def test_codes_by_holder_are_the_stable_sort(sets: list[list[int]]) -> None:
    """Both ways of sorting every page's codes (one number per code and holder for 32-bit keys, a stable
    argsort otherwise) give each code's holders in page order."""
    arrays = [np.array(sorted(codes), dtype=np.int64) for codes in sets]
    codes, owners = _by_code(arrays)
    flat = np.concatenate(arrays) if arrays else np.empty(0, dtype=np.int64)
    holder = np.repeat(np.arange(len(arrays)), [len(a) for a in arrays])
    order = np.argsort(flat, kind="stable")
    assert codes.tolist() == flat[order].tolist()
    assert owners.tolist() == holder[order].tolist()


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(-50, 50) | st.sampled_from(EDGES)),
    st.lists(st.integers(-50, 50) | st.sampled_from(EDGES)),
)
def test_held_is_isin(values: list[int], wanted: list[int]) -> None:
    array = np.array(values, dtype=np.int64)
    assert (
        _held(array, np.unique(np.array(wanted, dtype=np.int64))).tolist() == np.isin(array, wanted).tolist()
    )
