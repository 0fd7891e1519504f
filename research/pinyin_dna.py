"""The pinyin DNA fingerprint (seed fingerprint-system-architecture; ALGORITHMS.md 7), on the research shelf.

``dna_codes`` cuts a pinyin-initial string (``fingerprint.pinyin.pinyin_initials``) into segments of
``granularity`` letters starting every ``step = round(granularity * (1 - overlap))`` letters (segment i starts
at ``i * step``; with overlap 0.5: [0, n), [n/2, 3n/2), [n, 2n) ...; a text shorter than one segment gives one
short segment; letters after the last full segment are not covered). For each segment and each letter of
``alphabet`` it computes the deviation of the letter's count from the count expected under the reference
distribution, quantises it into ``levels`` values (0 .. levels-1, centred at levels // 2, ``counts_per_level``
counts per step, clipped at both ends) and concatenates the quantised values in alphabet order into one
integer: letter j occupies bits [j * b, (j + 1) * b) with b = bit width of levels - 1. The code must fit in 63
bits (a signed BIGINT), which bounds ``len(alphabet) * b``.

Why it is not on the page path: the ablation of ``benchmarks.accuracy.piracy`` (docs/compare.md) found no
copy that DNA codes as a candidate source add to the winnowing of initials (``+dna`` equals the product on
quick and full runs, two seeds), and alone they find 33-44 % of the copies: exact codes break on every
insertion or deletion, which shifts all later segment boundaries. :class:`DnaCandidateIndex` keeps that
measurement possible without the product storing DNA codes; ``research.dna_index`` matches codes within a
distance.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from fptrack.fingerprint.contract import CONTRACT, CandidateParams
from fptrack.fingerprint.pinyin import PINYIN_ALPHABET, letter_indices

__all__ = [
    "DnaCandidateIndex",
    "DnaParams",
    "dna_code_distance",
    "dna_codes",
    "dna_positions",
]


@dataclass(frozen=True)
class DnaParams:
    """Pinyin DNA parameters (defaults chosen by measurement, docs/fingerprints.md)."""

    granularity: int = 64
    overlap: float = 0.5
    levels: int = 4
    counts_per_level: float = 2.0
    alphabet: str = PINYIN_ALPHABET

    def __post_init__(self) -> None:
        if self.granularity < 1:
            raise ValueError(f"DNA granularity must be >= 1, got {self.granularity}")
        if not 0.0 <= self.overlap < 1.0:
            raise ValueError(f"DNA overlap must be in [0, 1), got {self.overlap}")
        if self.levels < 2:
            raise ValueError(f"DNA levels must be >= 2, got {self.levels}")
        if self.counts_per_level <= 0:
            raise ValueError(f"counts_per_level must be positive, got {self.counts_per_level}")
        if len(set(self.alphabet)) != len(self.alphabet) or not self.alphabet.isascii() or not self.alphabet:
            raise ValueError(f"alphabet must be distinct ASCII characters, got {self.alphabet!r}")
        if len(self.alphabet) * self.bits_per_letter > 63:
            raise ValueError(
                f"a DNA code of {len(self.alphabet)} letters x {self.bits_per_letter} bits does not fit in "
                "63 bits; use fewer levels or a shorter alphabet"
            )

    @property
    def step(self) -> int:
        return max(1, round(self.granularity * (1.0 - self.overlap)))

    @property
    def bits_per_letter(self) -> int:
        return (self.levels - 1).bit_length()


def dna_positions(length: int, params: DnaParams = DnaParams()) -> tuple[int, ...]:
    """Start offset of each DNA segment of a text of ``length`` initials (i * step)."""
    n = params.granularity
    if length <= 0:
        return ()
    if length < n:
        return (0,)
    return tuple(range(0, length - n + 1, params.step))


def dna_codes(
    initials: str, params: DnaParams = DnaParams(), reference: np.ndarray | None = None
) -> tuple[int, ...]:
    """The DNA code of every segment of ``initials`` (non-negative ints below 2^63).

    ``reference`` is the expected relative frequency of each ``params.alphabet`` letter (e.g.
    ``CorpusStats.pinyin_reference()``); None means uniform over the alphabet.
    """
    a = len(params.alphabet)
    if reference is None:
        ref = np.full(a, 1.0 / a)
    else:
        ref = np.asarray(reference, dtype=np.float64)
        if ref.shape != (a,):
            raise ValueError(
                f"reference must have one frequency per alphabet letter ({a}), got shape {ref.shape}"
            )
    starts = np.asarray(dna_positions(len(initials), params), dtype=np.int64)
    if starts.size == 0:
        return ()
    seg_len = min(params.granularity, len(initials))
    idx = letter_indices(initials, params.alphabet)
    # Prefix counts only at the block boundaries the segments need (blocks of gcd(step, n) letters).
    block = math.gcd(params.step, seg_len)
    n_blocks = len(initials) // block
    onehot_ids = (np.arange(n_blocks * block) // block) * (a + 1) + idx[: n_blocks * block]
    per_block = np.bincount(onehot_ids, minlength=n_blocks * (a + 1)).reshape(n_blocks, a + 1)[:, :a]
    prefix = np.zeros((n_blocks + 1, a), dtype=np.int64)
    np.cumsum(per_block, axis=0, out=prefix[1:])
    counts = prefix[(starts + seg_len) // block] - prefix[starts // block]
    deviation = counts - ref[None, :] * seg_len
    centre = params.levels // 2
    q = np.clip(np.floor(deviation / params.counts_per_level) + centre, 0, params.levels - 1).astype(np.int64)
    shifts = np.arange(a, dtype=np.int64) * params.bits_per_letter
    codes = (q << shifts[None, :]).sum(axis=1)
    return tuple(codes.tolist())


def dna_code_distance(a: int, b: int, params: DnaParams = DnaParams()) -> int:
    """L1 distance between the quantised letter vectors of two DNA codes (0 = identical)."""
    mask = (1 << params.bits_per_letter) - 1
    total = 0
    for j in range(len(params.alphabet)):
        shift = j * params.bits_per_letter
        total += abs(((a >> shift) & mask) - ((b >> shift) & mask))
    return total


class DnaCandidateIndex:
    """Registered chapters' DNA codes, inverted (code -> chapters holding it): pinyin DNA as a candidate
    source, ranked the way the product ranks a code kind (``compare.service``: distinct codes shared, at
    least ``min_shared``, the ``max_candidates`` best). Built in memory from the chapters' codes, so that a
    benchmark can measure DNA without the product computing or storing it."""

    def __init__(self, codes_by_owner: Mapping[int, Iterable[int]]) -> None:
        holders: dict[int, list[int]] = defaultdict(list)
        for owner, codes in codes_by_owner.items():
            for code in set(codes):
                holders[code].append(owner)
        self._holders = {code: tuple(owners) for code, owners in holders.items()}

    def shared_per_owner(self, codes: Iterable[int]) -> dict[int, int]:
        """owner -> number of the distinct ``codes`` it holds (owners holding none left out)."""
        shared: dict[int, int] = defaultdict(int)
        for code in set(codes):
            for owner in self._holders.get(code, ()):
                shared[owner] += 1
        return dict(shared)

    def candidates(
        self, codes: Iterable[int], params: CandidateParams = CONTRACT.candidates
    ) -> dict[int, int]:
        """The owners sharing at least ``params.min_shared`` distinct codes with ``codes``, most shared first
        (ties by owner id), at most ``params.max_candidates``: owner -> shared codes."""
        shared = self.shared_per_owner(codes)
        eligible = [owner for owner, n in shared.items() if n >= params.min_shared]
        ranked = sorted(eligible, key=lambda owner: (-shared[owner], owner))
        return {owner: shared[owner] for owner in ranked[: params.max_candidates]}
