from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fptrack.fingerprint.features import char_shingle_hashes
from fptrack.research.minhash import (
    MinHashParams,
    candidate_probability,
    containment,
    estimate_jaccard,
    jaccard,
    lsh_band_keys,
    minhash_signature,
    threshold_for,
)


def _sets(seed: int, size_a: int, size_b: int, shared: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, 2**63, size=size_a + size_b, dtype=np.uint64)
    common = pool[:shared]
    a = np.concatenate([common, pool[shared:size_a]])
    b = np.concatenate([common, pool[size_a : size_a + size_b - shared]])
    return a, b


def test_candidate_probability_matches_the_seed_example():
    assert candidate_probability(0.4, 3, 100) == pytest.approx(0.99866, abs=1e-5)
    assert candidate_probability(0.0, 4, 32) == 0.0
    assert candidate_probability(1.0, 4, 32) == 1.0
    assert 0.4 < threshold_for(4, 32) < 0.5
    with pytest.raises(ValueError, match="similarity"):
        candidate_probability(1.5, 3, 10)


def test_exact_jaccard_and_containment():
    a = np.array([1, 2, 3, 4], dtype=np.uint64)
    b = np.array([3, 4, 5, 6, 7, 8, 3], dtype=np.uint64)
    assert jaccard(a, b) == pytest.approx(2 / 8)
    assert containment(a, b) == 0.5
    assert containment(b, a) == pytest.approx(2 / 6)
    assert jaccard(a[:0], b[:0]) == 1.0 and containment(a[:0], b) == 0.0


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 3000),
    st.integers(1, 3000),
    st.floats(0.0, 1.0),
    st.sampled_from(["oph", "affine"]),
)
def test_estimate_within_its_statistical_bound(
    seed: int, size_a: int, size_b: int, share: float, scheme: str
):
    shared = int(share * min(size_a, size_b))
    a, b = _sets(seed, size_a, size_b, shared)
    params = MinHashParams(scheme=scheme, seed=seed % 1000 + 1)
    exact = jaccard(a, b)
    est = estimate_jaccard(minhash_signature(a, params), minhash_signature(b, params))
    # standard error sqrt(J(1-J)/n); 5 sigma + 1/n leaves a false-failure chance far below 1e-5 per example.
    # One-permutation hashing draws its n values from |A u B| elements only: for a set smaller than n the
    # densified bins copy each other, so the independent samples number |A u B|, not n.
    n = params.num_perm if scheme == "affine" else min(params.num_perm, len(np.union1d(a, b)))
    bound = 5 * math.sqrt(exact * (1 - exact) / n) + 1 / n
    assert abs(est - exact) <= bound, (exact, est)


@pytest.mark.parametrize("scheme", ["oph", "affine"])
def test_estimate_is_unbiased_on_average(scheme: str):
    errors = []
    for seed in range(40):
        a, b = _sets(seed, 400, 600, 200)  # J = 200 / 800
        p = MinHashParams(scheme=scheme, seed=seed + 1)
        errors.append(estimate_jaccard(minhash_signature(a, p), minhash_signature(b, p)) - 0.25)
    # mean of 40 estimates: standard error sqrt(.25 * .75 / 128 / 40) ~ 0.006
    assert abs(np.mean(errors)) < 0.025


@given(st.text(min_size=0, max_size=200))
def test_identical_input_identical_signature_and_keys(text: str):
    h = char_shingle_hashes(text, 5)
    s1, s2 = minhash_signature(h), minhash_signature(h.copy())
    assert np.array_equal(s1, s2)
    keys = lsh_band_keys(s1)
    assert keys == lsh_band_keys(s2) and len(keys) == 32
    assert all(-(1 << 63) <= k < (1 << 63) for k in keys)


def test_signature_ignores_duplicates_and_order():
    h = np.array([5, 9, 1, 5, 9], dtype=np.uint64)
    assert np.array_equal(minhash_signature(h), minhash_signature(np.array([9, 1, 5], dtype=np.uint64)))
    assert np.array_equal(minhash_signature(h.view(np.int64)), minhash_signature(h))


def test_empty_set_matches_only_empty():
    empty = minhash_signature(np.zeros(0, dtype=np.uint64))
    other = minhash_signature(np.array([1], dtype=np.uint64))
    assert estimate_jaccard(empty, empty) == 1.0 and estimate_jaccard(empty, other) == 0.0


def test_similar_sets_share_a_band_dissimilar_rarely():
    a, b = _sets(1, 1000, 1000, 900)  # J ~ 0.82
    ka, kb = set(lsh_band_keys(minhash_signature(a))), set(lsh_band_keys(minhash_signature(b)))
    assert ka & kb
    c, d = _sets(2, 1000, 1000, 0)
    assert not set(lsh_band_keys(minhash_signature(c))) & set(lsh_band_keys(minhash_signature(d)))


def test_params_validation():
    with pytest.raises(ValueError, match="bands x rows"):
        MinHashParams(num_perm=128, bands=10, rows=10)
    with pytest.raises(ValueError, match="power-of-two"):
        MinHashParams(num_perm=100, bands=20, rows=5)
    MinHashParams(num_perm=100, bands=20, rows=5, scheme="affine")
    with pytest.raises(ValueError, match="scheme"):
        MinHashParams(scheme="nope")
