"""Pinyin DNA codes matched by a small distance, not only exactly (ALGORITHMS.md 7: "matched by exact code or
by a small distance between code vectors").

A DNA code packs one quantised value per alphabet letter (``DnaParams.bits_per_letter`` bits each). Two
segments that share most of their text differ in a few letters by one level, so their codes are close in L1
distance over the letter vectors while rarely equal: an insertion or deletion shifts every later segment
boundary, which moves a few letters across a quantisation step.

Fast distance queries by **multi-index blocks** (the pigeonhole argument of Manku et al.'s permuted tables, on
L1 instead of Hamming): split the letters into ``max_distance + 1`` blocks; codes at L1 distance <= d differ
in at most d letters, so at least one block is identical. Each block's value is an exact key; a query looks up
its ``d + 1`` keys and verifies the candidates' distance with a vectorised unpacking. No false negatives.

Many queries at once (a whole document's codes against every stored code) go faster without the blocks:
:meth:`DnaIndex.min_distances` writes each letter value v as a **thermometer code** (v ones in ``levels - 1``
bits), under which the L1 distance of two letter vectors is the Hamming distance of their thermometer codes,
and counts differing bits with a popcount over all pairs. One pass gives the smallest distance to every owner,
from which any ``max_distance`` is read off (the benchmark sweeps d without querying again). With few letter
values (4 levels, values crowded near the middle) a block of 23 / (d + 1) letters is an unselective key, so
the blocks save little over the brute force once d >= 4."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from fptrack.research.pinyin_dna import DnaParams

__all__ = ["DnaIndex", "dna_distances", "thermometer_codes", "unpack_codes"]

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


def thermometer_codes(codes: Sequence[int] | np.ndarray, params: DnaParams = _DEFAULT) -> np.ndarray:
    """(n, words) uint64 thermometer codes of ``codes``: letter j with value v sets bits [j * (levels - 1), j
    * (levels - 1) + v), so that popcount(a ^ b) summed over the words is the L1 distance of the letter
    vectors."""
    values = unpack_codes(codes, params).astype(np.int64)
    width = params.levels - 1
    bits = np.arange(width, dtype=np.int64)
    # (n, letters * width) booleans, then packed 64 per word (little-endian bit order)
    flat = (values[:, :, None] > bits[None, None, :]).reshape(len(values), values.shape[1] * width)
    words = -(-flat.shape[1] // 64)
    padded = np.zeros((len(values), words * 64), dtype=np.uint8)
    padded[:, : flat.shape[1]] = flat
    packed: np.ndarray = np.packbits(padded, axis=1, bitorder="little").view(np.uint64)
    return packed


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
            (int(sum(((1 << bits) - 1) << (j * bits) for j in range(lo, hi))))
            for lo, hi in itertools.pairwise(edges.tolist())
        ]
        self._tables: list[dict[int, list[int]]] = [{} for _ in self._masks]
        self._codes: list[int] = []
        self._owners: list[int] = []
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None  # (codes, owners), rebuilt after an add
        # min_distances' layout for one ``owners`` bound, rebuilt after an add
        self._by_owner: tuple[int, np.ndarray, np.ndarray, np.ndarray] | None = None

    def add(self, owner: int, codes: Sequence[int]) -> None:
        self._arrays = None
        self._by_owner = None
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

    def min_distances(self, codes: Sequence[int], owners: int, chunk_pairs: int = 1 << 22) -> np.ndarray:
        """(len(codes), owners) smallest L1 distance from each query code to any stored code of owner
        ``0 .. owners - 1``; an owner without codes gets ``letters * (levels - 1) + 1`` (beyond any distance).

        Brute force over all pairs by thermometer codes and popcount, ``chunk_pairs`` pairs at a time
        (memory)."""
        if owners < 0:
            raise ValueError(f"owners must be >= 0, got {owners}")
        beyond = len(self.params.alphabet) * (self.params.levels - 1) + 1
        result = np.full((len(codes), owners), beyond, dtype=np.int16)
        if not len(codes) or not self._codes or not owners:
            return result
        stored, starts, present = self._thermometer_by_owner(owners)
        if not len(stored):
            return result
        query = thermometer_codes(codes, self.params)
        step = max(1, chunk_pairs // len(stored))
        small = beyond < 256  # popcounts add up in uint8 (one byte per pair: the pass is memory-bound)
        for lo in range(0, len(query), step):
            block = query[lo : lo + step]
            distance = np.bitwise_count(block[:, 0, None] ^ stored[None, :, 0])
            if not small:
                distance = distance.astype(np.int16)
            for word in range(1, stored.shape[1]):
                distance += np.bitwise_count(block[:, word, None] ^ stored[None, :, word])
            result[lo : lo + step, present] = np.minimum.reduceat(distance, starts, axis=1)
        return result

    def _thermometer_by_owner(self, owners: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Stored thermometer codes of the owners below ``owners``, sorted by owner; the first row of each
        owner present; those owners. Kept until the next :meth:`add`."""
        if self._by_owner is None or self._by_owner[0] != owners:
            all_owners = np.asarray(self._owners, dtype=np.int64)
            order = np.flatnonzero(all_owners < owners)
            order = order[np.argsort(all_owners[order], kind="stable")]
            present, starts = np.unique(all_owners[order], return_index=True)
            stored = thermometer_codes(np.asarray(self._codes, dtype=np.int64)[order], self.params)
            self._by_owner = (owners, stored, starts, present)
        return self._by_owner[1], self._by_owner[2], self._by_owner[3]

    def shares(self, codes: Sequence[int], owners: int) -> np.ndarray:
        """For each owner ``0 .. owners - 1``, the share of the query ``codes`` with a near code of that
        owner."""
        if not len(codes):
            return np.zeros(owners, dtype=np.float64)
        near = self.min_distances(codes, owners) <= self.max_distance
        shares: np.ndarray = near.mean(axis=0)
        return shares
