"""research.dna_index: near matching of pinyin DNA codes within an L1 distance, checked against direct
counts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fptrack.fingerprint.pinyin import pinyin_initials
from fptrack.research.dna_index import DnaIndex, dna_distances, thermometer_codes, unpack_codes
from fptrack.research.pinyin_dna import DnaParams, dna_code_distance, dna_codes
from tests.unit.fingerprint.strategies import COMMON_HAN


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=23, max_size=23),
    st.lists(st.integers(0, 3), min_size=23, max_size=23),
    st.integers(0, 4),
)
def test_the_dna_index_finds_exactly_the_codes_within_the_distance(a: list[int], b: list[int], d: int):
    p = DnaParams()
    pack = lambda values: sum(v << (2 * j) for j, v in enumerate(values))
    code_a, code_b = pack(a), pack(b)
    index = DnaIndex(p, max_distance=d)
    index.add(7, [code_b])
    distance = sum(abs(x - y) for x, y in zip(a, b))
    assert dna_distances(code_a, [code_b], p).tolist() == [distance] == [dna_code_distance(code_a, code_b, p)]
    assert index.near(code_a).tolist() == ([7] if distance <= d else [])
    assert unpack_codes([code_a], p).tolist() == [a]


def test_dna_near_matching_survives_an_insertion_that_exact_codes_do_not():
    text = "".join(COMMON_HAN[i * 37 % 3755] for i in range(1200))
    edited = text[:300] + "插" + text[300:]
    p = DnaParams()
    original, copy = dna_codes(pinyin_initials(text), p), dna_codes(pinyin_initials(edited), p)
    later_exact = sum(c in set(original) for c in copy[10:]) / len(copy[10:])
    index = DnaIndex(p, max_distance=2)
    index.add(0, original)
    shares = index.shares(copy, owners=1)
    assert shares[0] >= 0.9 > later_exact


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.lists(st.integers(0, 3), min_size=23, max_size=23)), max_size=30
    ),
    st.lists(st.lists(st.integers(0, 3), min_size=23, max_size=23), min_size=1, max_size=12),
    st.integers(1, 500),
)
def test_min_distances_is_the_smallest_distance_to_each_owner(
    stored: list[tuple[int, list[int]]], queries: list[list[int]], chunk: int
):
    p = DnaParams()
    pack = lambda values: sum(v << (2 * j) for j, v in enumerate(values))
    index = DnaIndex(p, max_distance=3)
    for owner, values in stored:
        index.add(owner, [pack(values)])
    # owner 5 left out
    smallest = index.min_distances([pack(q) for q in queries], owners=5, chunk_pairs=chunk)
    beyond = 23 * 3 + 1
    for i, q in enumerate(queries):
        for owner in range(5):
            distances = [sum(abs(x - y) for x, y in zip(q, v)) for o, v in stored if o == owner]
            assert smallest[i, owner] == min(distances, default=beyond)
    near = [
        sum(
            1
            for q in queries
            if any(sum(abs(x - y) for x, y in zip(q, v)) <= 3 for o, v in stored if o == owner)
        )
        / len(queries)
        for owner in range(5)
    ]
    assert index.shares([pack(q) for q in queries], owners=5).tolist() == pytest.approx(near)


def test_thermometer_codes_turn_l1_into_hamming():
    p = DnaParams(granularity=128, counts_per_level=3)
    a, b = [3, 0, 1, 2] + [1] * 19, [0, 3, 1, 1] + [2] * 19
    pack = lambda values: sum(v << (2 * j) for j, v in enumerate(values))
    words = thermometer_codes([pack(a), pack(b)], p)
    assert words.shape == (2, 2)  # 23 letters x 3 bits = 69 bits
    assert (
        int(np.bitwise_count(words[0] ^ words[1]).sum())
        == dna_code_distance(pack(a), pack(b), p)
        == 3 + 3 + 0 + 1 + 19
    )
