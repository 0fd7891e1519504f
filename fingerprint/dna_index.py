"""Pinyin DNA codes matched by a small distance, not only exactly (ALGORITHMS.md 7: "matched by exact code or by a
small distance between code vectors").

A DNA code packs one quantised value per alphabet letter (``DnaParams.bits_per_letter`` bits each). Two segments
that share most of their text differ in a few letters by one level, so their codes are close in L1 distance over
the letter vectors while rarely equal: an insertion or deletion shifts every later segment boundary, which moves
a few letters across a quantisation step.

Fast distance queries by **multi-index blocks** (the pigeonhole argument of Manku et al.'s permuted tables, on
L1 instead of Hamming): split the letters into ``max_distance + 1`` blocks; codes at L1 distance <= d differ in
at most d letters, so at least one block is identical. Each block's value is an exact key; a query looks up its
``d + 1`` keys and verifies the candidates' distance with a vectorised unpacking. No false negatives.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from fingerprint.pinyin_dna import DnaParams

__all__ = ["DnaIndex", "dna_distances", "unpack_codes"]

_DEFAULT = DnaParams()


def unpack_codes(codes: Sequence[int] | np.ndarray, params: DnaParams = _DEFAULT) -> np.ndarray:
    """(n, letters) int8 matrix of the quantised letter values of ``codes``."""
    array = np.asarray(codes, dtype=np.int64).reshape(-1)
    bits = params.bits_per_letter
    shifts = np.arange(len(params.alphabet), dtype=np.int64) * bits
    values: np.ndarray = ((array[:, None] >> shifts[None, :]) & ((1 << bits) - 1)).astype(np.int8)
    return values


def dna_distances(code: int, others: Sequence[int] | np.ndarray, params: DnaParams = _DEFAULT) -> np.ndarray:
    """L1 distance between the letter vectors of ``code`` and of each of ``others``."""
    distances: np.ndarray = np.abs(
        unpack_codes(others, params).astype(np.int16) - unpack_codes([code], params).astype(np.int16)
    ).sum(axis=1)
    return distances


class DnaIndex:
    """Owners' DNA codes, queried for codes within ``max_distance`` (L1 over the letter vectors)."""

    def __init__(self, params: DnaParams = _DEFAULT, max_distance: int = 2) -> None:
        if max_distance < 0:
            raise ValueError(f"max_distance must be >= 0, got {max_distance}")
        letters = len(params.alphabet)
        blocks = min(max_distance + 1, letters)
        self.params = params
        self.max_distance = max_distance
        bits = params.bits_per_letter
        edges = np.linspace(0, letters, blocks + 1).round().astype(int)
        self._masks = [
            (int(sum(((1 << bits) - 1) << (j * bits) for j in range(lo, hi)))) for lo, hi in itertools.pairwise(edges.tolist())
        ]
        self._tables: list[dict[int, list[int]]] = [{} for _ in self._masks]
        self._codes: list[int] = []
        self._owners: list[int] = []
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None  # (codes, owners), rebuilt after an add

    def add(self, owner: int, codes: Sequence[int]) -> None:
        self._arrays = None
        for code in codes:
            row = len(self._codes)
            self._codes.append(int(code))
            self._owners.append(owner)
            for table, mask in zip(self._tables, self._masks):
                table.setdefault(int(code) & mask, []).append(row)

    def __len__(self) -> int:
        return len(self._codes)

    def near(self, code: int) -> np.ndarray:
        """Owners (one entry per matching stored code) holding a code within ``max_distance`` of ``code``."""
        rows: set[int] = set()
        for table, mask in zip(self._tables, self._masks):
            rows.update(table.get(int(code) & mask, ()))
        if not rows:
            return np.empty(0, dtype=np.int64)
        if self._arrays is None:
            self._arrays = (np.asarray(self._codes, dtype=np.int64), np.asarray(self._owners, dtype=np.int64))
        all_codes, all_owners = self._arrays
        ordered = np.fromiter(rows, dtype=np.int64, count=len(rows))
        keep = dna_distances(code, all_codes[ordered], self.params) <= self.max_distance
        owners: np.ndarray = all_owners[ordered[keep]]
        return owners

    def shares(self, codes: Sequence[int], owners: int) -> np.ndarray:
        """For each owner ``0 .. owners - 1``, the share of the query ``codes`` with a near code of that owner."""
        found = np.zeros(owners, dtype=np.float64)
        if not len(codes):
            return found
        for code in codes:
            hit = np.unique(self.near(code))
            found[hit[hit < owners]] += 1
        shares: np.ndarray = found / len(codes)
        return shares
