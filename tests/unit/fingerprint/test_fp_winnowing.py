from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fptrack.fingerprint.winnowing import winnow, winnow_hashes

from .strategies import COMMON_HAN


def _brute_force(hashes: list[int], w: int) -> list[int]:
    chosen: list[int] = []
    for start in range(len(hashes) - w + 1):
        window = hashes[start : start + w]
        m = min(window)
        pos = start + max(i for i, h in enumerate(window) if h == m)
        if not chosen or chosen[-1] != pos:
            chosen.append(pos)
    return chosen


@given(st.lists(st.integers(min_value=-50, max_value=50), min_size=1, max_size=80), st.integers(1, 10))
def test_matches_the_definition(values: list[int], w: int):
    hashes, positions = winnow_hashes(np.array(values, dtype=np.int64), w)
    if len(values) > w:
        assert positions.tolist() == _brute_force(values, w)
    assert hashes.tolist() == [values[p] for p in positions.tolist()]


han = st.text(alphabet=st.sampled_from(COMMON_HAN[:40]), min_size=0, max_size=120)


@settings(max_examples=300)
@given(
    han,
    han,
    han,
    st.text(alphabet=st.sampled_from(COMMON_HAN), min_size=0, max_size=60),
    st.integers(2, 6),
    st.integers(2, 8),
    st.integers(0, 20),
)
def test_every_shared_run_of_w_plus_k_minus_1_is_found(a_pre, b_pre, b_post, extra, k, w, slack):
    run_len = w + k - 1 + slack
    shared = (extra * (run_len // max(len(extra), 1) + 1))[:run_len] if extra else "中" * run_len
    a = a_pre + shared + "尾"
    b = b_pre + shared + b_post
    fa = [(h, p) for h, p in winnow(a, k, w) if len(a_pre) <= p and p + k <= len(a_pre) + run_len]
    fb = {h for h, p in winnow(b, k, w) if len(b_pre) <= p and p + k <= len(b_pre) + run_len}
    assert {h for h, _ in fa} & fb


@given(han, st.integers(1, 6), st.integers(1, 8))
def test_deterministic_and_positions_in_range(text: str, k: int, w: int):
    fp = winnow(text, k, w)
    assert fp == winnow(text, k, w)
    assert all(0 <= p <= len(text) - k for _, p in fp)
    assert all(-(1 << 63) <= h < (1 << 63) for h, _ in fp)
    if len(text) >= k:
        assert fp


def test_bad_parameters():
    with pytest.raises(ValueError, match="k-gram"):
        winnow("abc", 0, 2)
    with pytest.raises(ValueError, match="window"):
        winnow("abc", 2, 0)
