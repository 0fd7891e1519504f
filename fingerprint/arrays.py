"""Array helpers the page path shares (fingerprinting, the index writes, the compare)."""

from __future__ import annotations

import numpy as np

__all__ = ["distinct"]


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of an integer array (any shape), sorted: ``np.unique(values)``, by a sort.

    Why not ``np.unique``: from numpy 2.3 it finds the distinct values of an unsorted array with a hash table
    and sorts them afterwards, which for the int64 codes of the page path (10^2 to 10^4 of them) costs 8-15
    times a sort and one comparison of neighbours (35 us instead of 4 for a page's 540 winnowing hashes, 1.5
    ms instead of 0.1 for a batch's 18,000)."""
    ordered = np.sort(np.asarray(values).reshape(-1))
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]
