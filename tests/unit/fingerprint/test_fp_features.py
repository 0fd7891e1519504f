from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fptrack.fingerprint.features import (
    STOP_WORDS,
    char_shingle_hashes,
    hash_strings,
    segment,
    token_hashes,
    tokenize,
)

from .strategies import han_text


def test_segment_drops_stop_words():
    words = segment("我们的能力比学历重要")
    assert "的" not in words and "我们" not in words
    assert "能力" in words and "学历" in words
    assert set(tokenize("我们的能力")) >= {"我们", "的"}


def test_segment_empty():
    assert segment("") == [] and tokenize("") == []


def test_char_shingle_hashes_of_short_text_and_bad_k():
    assert np.array_equal(char_shingle_hashes("abcd", 2), hash_strings(["ab", "bc", "cd"]))
    assert len(char_shingle_hashes("ab", 3)) == 0
    with pytest.raises(ValueError, match="k must be"):
        char_shingle_hashes("ab", 0)


@given(han_text, st.integers(min_value=1, max_value=8))
def test_shingle_hashes_match_hashing_the_shingles(text: str, k: int):
    shingles = [text[i : i + k] for i in range(len(text) - k + 1)]
    assert np.array_equal(char_shingle_hashes(text, k), hash_strings(shingles))


@given(st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=50))
def test_token_hash_is_a_function_of_the_token(tokens: list[str]):
    hashes = token_hashes(tokens)
    singles = np.concatenate([token_hashes([t]) for t in tokens])
    assert np.array_equal(hashes, singles)
    by_token: dict[str, int] = {}
    for t, h in zip(tokens, hashes.tolist()):
        assert by_token.setdefault(t, h) == h


def test_hash_bits_are_uniform():
    # every bit of the feature hash is set about half the time (blocks are used as index keys)
    words = [f"词{i}" for i in range(20000)]
    hashes = token_hashes(words)
    bits = np.unpackbits(hashes.view(np.uint8).reshape(-1, 8), axis=1)
    share = bits.mean(axis=0)
    assert np.all(np.abs(share - 0.5) < 0.03), share


def test_seeds_are_independent_and_distinct():
    words = [f"w{i}" for i in range(5000)]
    a, b = token_hashes(words, 0), token_hashes(words, 1)
    assert len(np.unique(a)) == len(words)
    agreement = np.unpackbits((~(a ^ b)).view(np.uint8)).mean()
    assert abs(agreement - 0.5) < 0.02


def test_stop_words_are_lower_case_and_normalised():
    from fptrack.fingerprint.normalize import normalize

    assert all(normalize(w).text == w for w in STOP_WORDS)
