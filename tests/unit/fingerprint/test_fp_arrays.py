"""fingerprint.arrays.distinct: np.unique's answer (sorted distinct values, same dtype) by a sort."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fptrack.fingerprint.arrays import distinct


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=200), st.integers(1, 4))
def test_distinct_is_np_unique(values: list[int], repeat: int) -> None:
    array = np.array(values * repeat, dtype=np.int64)
    found = distinct(array)
    assert found.dtype == np.int64
    assert found.tolist() == np.unique(array).tolist()
    assert array.tolist() == (values * repeat)  # the input is left as it was


def test_distinct_of_a_table_flattens_it() -> None:
    table = np.array([[3, 1], [1, 3], [2, 2]], dtype=np.int64)
    assert distinct(table).tolist() == [1, 2, 3]
    assert distinct(np.empty(0, dtype=np.int64)).tolist() == []
