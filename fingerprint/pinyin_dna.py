"""Pinyin initials and the pinyin DNA fingerprint (seed fingerprint-system-architecture; ALGORITHMS.md 7).

``pinyin_initials`` turns normalised text into a string of the same length: for each Han character the
first letter of its pinyin, for each Latin letter or digit the character itself (lower-cased). Homophone
swaps (a favourite trick of pirate sites), Traditional/Simplified and encoding differences disappear in
this string. It is built from a per-code-point table derived once from pypinyin's character dictionary
(the most common reading of each character) and applied with a numpy gather; pypinyin's phrase-aware
``lazy_pinyin`` differs only on polyphonic characters (measured in benchmarks/fingerprint_throughput.py).
Characters with no known reading (rare Han, kana, other scripts) map to ``_``.

``dna_codes`` cuts the initials into segments of ``granularity`` letters starting every
``step = round(granularity * (1 - overlap))`` letters (segment i starts at ``i * step``; with overlap 0.5:
[0, n), [n/2, 3n/2), [n, 2n) ...; a text shorter than one segment gives one short segment; letters after
the last full segment are not covered). For each segment and each letter of ``alphabet`` it computes
the deviation of the letter's count from the count expected under the reference distribution, quantises
it into ``levels`` values (0 .. levels-1, centred at levels // 2, ``counts_per_level`` counts per step,
clipped at both ends) and concatenates the quantised values in alphabet order into one integer:
letter j occupies bits [j * b, (j + 1) * b) with b = bit width of levels - 1. The code must fit in 63
bits (stored as signed BIGINT), which bounds ``len(alphabet) * b``.
"""

from __future__ import annotations

import functools
import math
import unicodedata
from dataclasses import dataclass

import numpy as np

__all__ = [
    "PINYIN_ALPHABET",
    "UNKNOWN_INITIAL",
    "DnaParams",
    "dna_code_distance",
    "dna_codes",
    "dna_positions",
    "initial_counts",
    "pinyin_initials",
]

# Letters that start a pinyin syllable (no syllable starts with i, u or v).
PINYIN_ALPHABET = "abcdefghjklmnopqrstwxyz"
UNKNOWN_INITIAL = "_"
_MAX_CODE_POINT = 0x110000


@functools.cache
def _initial_table() -> np.ndarray:
    """uint8[code point] -> ASCII initial; built once from pypinyin's single-character dictionary."""
    from pypinyin.pinyin_dict import pinyin_dict  # lazily: only the table build needs it

    table = np.full(_MAX_CODE_POINT, ord(UNKNOWN_INITIAL), dtype=np.uint8)
    for cp, readings in pinyin_dict.items():
        first_reading = readings.split(",", 1)[0]
        if not first_reading:
            continue
        base = unicodedata.normalize("NFD", first_reading[0])[0].lower()
        if "a" <= base <= "z":
            table[cp] = ord(base)
    for ch in "abcdefghijklmnopqrstuvwxyz0123456789":
        table[ord(ch)] = ord(ch)
    for ch in "ABCDEFGHIJKLMNOPQRSTUVWXYZ":
        table[ord(ch)] = ord(ch.lower())
    return table


def pinyin_initials(normalized: str) -> str:
    """One ASCII character per character of ``normalized`` (same length): pinyin initial, letter or digit."""
    if not normalized:
        return ""
    cps = np.frombuffer(normalized.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    return _initial_table()[cps].tobytes().decode("ascii")


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


def _letter_indices(initials: str, alphabet: str) -> np.ndarray:
    """Index of each character in ``alphabet``, or len(alphabet) for characters outside it."""
    lut = np.full(256, len(alphabet), dtype=np.int64)
    for i, ch in enumerate(alphabet):
        lut[ord(ch)] = i
    return lut[np.frombuffer(initials.encode("ascii", "replace"), dtype=np.uint8)]


def initial_counts(initials: str, alphabet: str = PINYIN_ALPHABET) -> np.ndarray:
    """Count of each ``alphabet`` letter in ``initials`` (int64, alphabet order)."""
    idx = _letter_indices(initials, alphabet)
    return np.bincount(idx, minlength=len(alphabet) + 1)[: len(alphabet)].astype(np.int64)


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
    idx = _letter_indices(initials, params.alphabet)
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
