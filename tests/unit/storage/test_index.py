import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fptrack.fingerprint.simhash import hamming
from fptrack.storage.index import DEFAULT_LAYOUT, IndexLayout, to_signed64, to_unsigned64

u64 = st.integers(min_value=0, max_value=(1 << 64) - 1)


@given(u64)
def test_signed_round_trip(value: int) -> None:
    signed = to_signed64(value)
    assert -(1 << 63) <= signed < (1 << 63)
    assert to_unsigned64(signed) == value


def _flip(value: int, positions: list[int]) -> int:
    for p in positions:
        value ^= 1 << p
    return value


@settings(max_examples=300)
@given(u64, st.lists(st.integers(0, 63), max_size=3, unique=True), st.sampled_from([(3, 4), (3, 5), (2, 3)]))
def test_near_neighbours_share_a_key(value: int, flips: list[int], k_blocks: tuple[int, int]) -> None:
    k, blocks = k_blocks
    flips = flips[:k]
    layout = IndexLayout(64, k, blocks)
    other = _flip(value, flips)
    assert hamming(value, other) == len(flips)
    assert set(layout.keys(value)) & set(layout.keys(other)), "pigeonhole: some table must agree"


def test_table_count_is_binomial() -> None:
    assert IndexLayout(64, 3, 4).table_count == 4
    assert IndexLayout(64, 3, 5).table_count == 10
    assert IndexLayout(64, 3, 6).table_count == 20


def test_far_fingerprints_rarely_collide() -> None:
    rng = random.Random(7)
    values = [rng.getrandbits(64) for _ in range(2000)]
    keys = {}
    collisions = 0
    for v in values:
        for key in DEFAULT_LAYOUT.keys(v):
            collisions += key in keys
            keys[key] = v
    # 16-bit keys in 4 tables for 2000 values: expected ~ 4 * C(2000,2) / 65536 ~ 122 bucket collisions
    assert collisions < 400


def test_invalid_layout_is_rejected() -> None:
    with pytest.raises(ValueError, match="k < blocks"):
        IndexLayout(64, 4, 4)
