"""Winnowing (Schleimer, Wilkerson, Aiken, "Winnowing: local algorithms for document fingerprinting",
SIGMOD 2003) for passage localisation (ALGORITHMS.md 8).

Hash every k-gram of the text; slide a window over w consecutive k-gram hashes; in each window select the
minimum hash (the rightmost one on ties) and record it once as (hash, position of its k-gram). Guarantee:
two texts sharing a run of at least ``w + k - 1`` characters share at least one selected fingerprint whose
k-gram lies inside that run in both texts (the run holds w whole k-grams, i.e. one whole window, and both
texts select that window's minimum). Noise shorter than k is never selected.

Run it over the normalised text (exact passages) and over the pinyin-initial string (passages that survive
homophone swaps and Traditional/Simplified conversion); positions index the input string, and the two are
aligned because initials have one character per normalised character.

Hashes are the 64-bit feature hashes of ``features.char_shingle_hashes`` reinterpreted as signed int64,
so they go into a BIGINT column as they are.
"""

from __future__ import annotations

import numpy as np

from fptrack.fingerprint.features import char_shingle_hashes

__all__ = ["pairs_of", "winnow", "winnow_array", "winnow_hashes"]


def _rightmost_window_argmin(h: np.ndarray, w: int) -> np.ndarray:
    """For each window h[i:i+w] (i = 0 .. n-w), the index of its rightmost minimum.

    Sparse-table doubling: argmins of windows of 1, 2, 4 ... p <= w elements, then each window of w is
    covered by two overlapping windows of p; O(n log w) vectorised work instead of O(n w). The minima are
    carried beside their indices, so each step compares slices instead of gathering ``h`` at the indices.
    """
    n = h.size
    best = np.arange(n, dtype=np.int64)  # argmin of the window of `span` elements starting at i
    minima = h  # and its value
    span = 1
    while span * 2 <= w:
        # right side wins ties: the rightmost minimum
        right_wins = minima[span:] <= minima[: minima.size - span]
        best = np.where(right_wins, best[span:], best[: best.size - span])
        minima = np.minimum(minima[span:], minima[: minima.size - span])
        span *= 2
    count = n - w + 1
    right_wins = minima[w - span : w - span + count] <= minima[:count]
    chosen: np.ndarray = np.where(right_wins, best[w - span : w - span + count], best[:count])
    return chosen


def winnow_hashes(hashes: np.ndarray, w: int) -> tuple[np.ndarray, np.ndarray]:
    """Winnow a sequence of int64 hashes with window ``w``: (selected hashes, their indices), in order.

    A sequence shorter than one window is treated as one window (its minimum is selected).
    """
    if w < 1:
        raise ValueError(f"winnowing window w must be >= 1, got {w}")
    h = np.asarray(hashes, dtype=np.int64)
    n = h.size
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if n <= w:
        rev = h[::-1]
        pos = n - 1 - int(np.argmin(rev))
        return h[pos : pos + 1].copy(), np.array([pos], dtype=np.int64)
    positions = _rightmost_window_argmin(h, w)
    # selected positions never decrease; keep each once
    keep = np.ones(positions.size, dtype=bool)
    keep[1:] = positions[1:] != positions[:-1]
    positions = positions[keep]
    return h[positions], positions


def winnow(text: str, k: int, w: int) -> tuple[tuple[int, int], ...]:
    """Winnowing fingerprints of ``text``: ((hash, position), ...) with signed 64-bit hashes.

    ``position`` is the index in ``text`` of the first character of the selected k-gram.
    """
    return pairs_of(winnow_array(text, k, w))


def winnow_array(text: str, k: int, w: int) -> np.ndarray:
    """:func:`winnow` as an ``(n, 2)`` int64 array: column 0 the signed hashes, column 1 the positions."""
    if k < 1:
        raise ValueError(f"winnowing k-gram length k must be >= 1, got {k}")
    hashes = char_shingle_hashes(text, k).view(np.int64)
    selected, positions = winnow_hashes(hashes, w)
    return np.column_stack((selected, positions)).astype(np.int64, copy=False).reshape(-1, 2)


def pairs_of(array: np.ndarray) -> tuple[tuple[int, int], ...]:
    """The ``(hash, position)`` pairs of a :func:`winnow_array`, as Python ints."""
    return tuple(zip(array[:, 0].tolist(), array[:, 1].tolist()))
