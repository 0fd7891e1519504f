"""The page sample (storage.fingerprints.page_sample): the minimum of every window of W k-grams, taken from
the winnowing-selected codes alone, keeps winnowing's guarantee at the larger window; and the codes read
into arrays in their signed form (signed_codes_array, code_array)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fptrack.fingerprint.winnowing import winnow, winnow_hashes
from fptrack.storage.fingerprints import (
    INITIALS_WINDOW_FACTOR,
    code_array,
    page_code_row,
    page_sample,
    signed_codes_array,
    stored_template_keys,
)
from fptrack.storage.index import to_signed64

ALPHABET = "天地玄黄宇宙洪荒日月盈昃"  # few symbols: repeated k-grams and equal hashes happen


def _pairs(text: str, k: int, w: int) -> np.ndarray:
    return np.array(winnow(text, k, w), dtype=np.int64).reshape(-1, 2)


@settings(max_examples=150, deadline=None)
@given(
    st.text(ALPHABET, max_size=400),
    st.text(ALPHABET, max_size=400),
    st.text(ALPHABET, min_size=1, max_size=300),
    st.integers(16, 80),
    st.integers(2, 9),
)
def test_any_shared_run_of_w_plus_k_minus_1_shares_a_sampled_code(
    left: str, right: str, shared: str, window: int, k: int
) -> None:
    run = (shared * (1 + (window + k) // len(shared)))[: window + k - 1]
    page = left + run + right
    chapter = right[::-1] + run + left[::-1]
    sampled = page_sample(_pairs(page, k, 16), window)
    chapter_codes = _pairs(chapter, k, 16)[:, 0]
    assert np.intersect1d(sampled, chapter_codes).size > 0
    # and the sample is a subset of what winnowing selected
    assert np.isin(sampled, _pairs(page, k, 16)[:, 0]).all()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=600), st.integers(16, 200))
def test_the_sample_holds_every_window_minimum_of_the_hashes(values: list[int], window: int) -> None:
    hashes = np.array(values, dtype=np.int64)
    selected, positions = winnow_hashes(hashes, 16)
    sample = set(page_sample(np.column_stack((selected, positions)), window).tolist())
    if len(hashes) <= window:
        assert int(hashes.min()) in sample
    else:
        windows = np.lib.stride_tricks.sliding_window_view(hashes, window)
        assert set(windows.min(axis=1).tolist()) <= sample


def _every_window_minimum(pairs: np.ndarray, window: int) -> set[int]:
    """The sample by its definition: for every start s from 0 to the last selected position, the minimum code
    of the pairs at positions in [s, s + window), when there is one."""
    minima = set()
    for start in range(int(pairs[:, 1].max()) + 1):
        inside = pairs[(pairs[:, 1] >= start) & (pairs[:, 1] < start + window), 0]
        if inside.size:
            minima.add(int(inside.min()))
    return minima


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(-(2**63), 2**63 - 1), st.integers(0, 700)),
        min_size=1,
        max_size=120,
        unique_by=lambda pair: pair[1],
    ),
    st.integers(1, 90),
)
def test_the_sample_is_the_minimum_of_every_window_of_positions(
    pairs: list[tuple[int, int]], window: int
) -> None:
    # any pairs, in any order, with gaps wider than the window: the windows evaluated are only those where
    # the pairs inside change, and they must give every window's minimum and nothing else
    array = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    assert page_sample(array, window).tolist() == sorted(_every_window_minimum(array, window))


def test_sample_size_and_edge_cases() -> None:
    rng = np.random.default_rng(3)
    text = "".join(chr(0x4E00 + int(c)) for c in rng.integers(0, 3000, 6000))
    pairs = _pairs(text, 8, 16)
    kept = {window: len(page_sample(pairs, window)) for window in (32, 128)}
    # about 2 / (W + 1) of the k-grams, against 2 / 17 for winnowing
    assert kept[128] < kept[32] < len(np.unique(pairs[:, 0]))
    assert 60 <= kept[128] <= 130
    assert page_sample(np.empty((0, 2), dtype=np.int64), 64).size == 0
    assert page_sample(np.array([[5, 3]]), 64).tolist() == [5]


def test_page_code_row_keeps_the_template_keys_and_one_sample_of_every_kind() -> None:
    chars = _pairs("天地玄黄宇宙洪荒" * 40, 8, 16)
    initials = _pairs("tdxhyzhh" * 40, 12, 16)
    row = page_code_row(7, {"winnow": chars, "winnow_py": initials}, 64, postgres=False)
    keys = sorted({code >> 32 for code in chars[:, 0].tolist()})
    assert stored_template_keys(row["winnow"]).tolist() == keys
    assert len(row["winnow"]) == 1 + 4 * len(keys)  # 4 bytes a key
    # a row written before revision 0022 kept the whole hashes: read as their keys
    whole = np.unique(chars[:, 0]).astype("<i8").tobytes()
    assert stored_template_keys(whole).tolist() == keys
    assert stored_template_keys(b"").tolist() == []
    sample = np.frombuffer(row["sample"], "<i8")
    # the initials at four times the window (INITIALS_WINDOW_FACTOR), the characters at the window
    expected = np.union1d(page_sample(chars, 64), page_sample(initials, 64 * INITIALS_WINDOW_FACTOR))
    assert sample.tolist() == expected.tolist()
    assert page_code_row(7, {"winnow": chars}, 64, postgres=True)["sample"] == page_sample(chars, 64).tolist()


@settings(max_examples=100, deadline=None)
@given(
    st.text(ALPHABET, max_size=300),
    st.text(ALPHABET, max_size=300),
    st.text(ALPHABET, min_size=1, max_size=200),
    st.integers(16, 40),
    st.integers(1, 6),
)
def test_a_page_sampled_at_a_larger_window_is_found_by_the_chapter_sample_at_the_smaller(
    left: str, right: str, shared: str, window: int, factor: int
) -> None:
    """The initials of a page are sampled at INITIALS_WINDOW_FACTOR times its window and a new work looks them
    up with its own sample at the window itself: a run of ``factor * W + k - 1`` characters shares one."""
    k = 12
    run = (shared * (1 + (factor * window + k) // len(shared)))[: factor * window + k - 1]
    page = left + run + right
    chapter = right[::-1] + run + left[::-1]
    stored = page_sample(_pairs(page, k, 16), factor * window)
    looked_up = page_sample(_pairs(chapter, k, 16), window)
    assert np.intersect1d(stored, looked_up).size > 0


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.integers(-(2**63), 2**63 - 1),  # signed, as winnowing gives them
            st.integers(0, 2**64 - 1),  # unsigned, as older callers and payloads give them
        ),
        max_size=50,
    )
)
def test_codes_read_in_c_are_each_codes_signed_form(codes: list[int]) -> None:
    """signed_codes_array reads signed, unsigned or mixed codes alike: to_signed64 of each, in order."""
    array = signed_codes_array(codes)
    assert array.dtype == np.int64
    assert array.tolist() == [to_signed64(code) for code in codes]
    pairs = [(code, position) for position, code in enumerate(codes)]
    assert code_array(pairs).tolist() == [[to_signed64(code), p] for code, p in pairs]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-50, 50), st.integers(0, 300)), min_size=1, max_size=150),
    st.integers(1, 90),
)
def test_pairs_sharing_positions_and_codes_are_sampled_by_the_definition(
    pairs: list[tuple[int, int]], window: int
) -> None:
    # pairs given by hand may repeat a position or a code, and come in any order
    array = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    assert page_sample(array, window).tolist() == sorted(_every_window_minimum(array, window))
