import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fptrack.fingerprint.simhash import hamming
from fptrack.storage.index import DEFAULT_LAYOUT, IndexLayout

u64 = st.integers(min_value=0, max_value=(1 << 64) - 1)
layouts = st.sampled_from(
    [DEFAULT_LAYOUT, IndexLayout(64, 3, 5), IndexLayout(64, 2, 4), IndexLayout(64, 1, 3)]
)


@settings(max_examples=300)
@given(u64, st.lists(st.integers(0, 63), max_size=3, unique=True), layouts)
def test_resplit_bucket_keeps_every_near_neighbour(value: int, flips: list[int], layout: IndexLayout) -> None:
    """Pigeonhole twice: a neighbour within k bits that shares table t's key shares one of its k + 1
    sub-keys."""
    other = value
    for bit in flips[: layout.k]:
        other ^= 1 << bit
    assert hamming(value, other) <= layout.k
    keys, other_keys = dict(layout.keys(value)), dict(layout.keys(other))
    shared_tables = [t for t in keys if keys[t] == other_keys[t]]
    assert shared_tables
    for t in shared_tables:
        assert set(layout.split_keys(value, t)) & set(layout.split_keys(other, t))


def test_default_resplit_is_the_seeds_twelve_more_bits() -> None:
    # 16-bit keys; the 48 remaining bits in k + 1 = 4 sub-blocks of 12: sub-keys of 28 bits
    layout = DEFAULT_LAYOUT
    assert [layout.key_bits(t) for t in range(4)] == [16, 16, 16, 16]
    value = 0xFEDC_BA98_7654_3210
    assert layout.keys(value)[0] == (0, 0xFEDC)
    assert layout.split_keys(value, 0) == [(0, 0xFEDC_BA9), (1, 0xFEDC_876), (2, 0xFEDC_543), (3, 0xFEDC_210)]
    assert layout.expected_bucket_size(2**33) == 131072  # the seed's 2^33 documents, 65,536 buckets


def test_layout_names_round_trip() -> None:
    for layout in (DEFAULT_LAYOUT, IndexLayout(64, 3, 5), IndexLayout(32, 1, 2)):
        assert IndexLayout.from_name(layout.name) == layout
    with pytest.raises(ValueError, match="layout name"):
        IndexLayout.from_name("blocks=4")
    with pytest.raises(ValueError, match="at most 64 bits"):
        IndexLayout(128, 10, 11)
