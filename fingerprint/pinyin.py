"""Pinyin initials: one letter per character, so that same-sound swaps and script changes disappear
(seed fingerprint-system-architecture; ALGORITHMS.md 7).

``pinyin_initials`` turns normalised text into a string of the same length: for each Han character the
first letter of its pinyin, for each Latin letter or digit the character itself (lower-cased). Homophone
swaps (a favourite trick of pirate sites), Traditional/Simplified and encoding differences disappear in
this string. It is built from a per-code-point table derived once from pypinyin's character dictionary
(the most common reading of each character) and applied with a numpy gather; pypinyin's phrase-aware
``lazy_pinyin`` differs only on polyphonic characters (``benchmarks.fingerprint.throughput`` measures it).
Characters with no known reading (rare Han, kana, other scripts) map to ``_`` (:data:`UNKNOWN_INITIAL`).

The page path reads the initials twice: winnowing over them makes candidates of same-sound copies, and the
alignment's initials channel (``compare.verify``) verifies them. ``initial_counts`` feeds the corpus
statistics (``fingerprint.stats``). The pinyin DNA codes built on the initials are on the research shelf
(``research.pinyin_dna``): the ablation found no copy they add to the winnowing of initials.
"""

from __future__ import annotations

import functools
import unicodedata
from pathlib import Path

import numpy as np

from fptrack.fingerprint.table_files import save_table_file, table_cache_file

__all__ = [
    "PINYIN_ALPHABET",
    "UNKNOWN_INITIAL",
    "initial_counts",
    "letter_indices",
    "pinyin_initials",
]

# Letters that start a pinyin syllable (no syllable starts with i, u or v).
PINYIN_ALPHABET = "abcdefghjklmnopqrstwxyz"
UNKNOWN_INITIAL = "_"
_MAX_CODE_POINT = 0x110000


@functools.cache
def _initial_table() -> np.ndarray:
    """uint8[code point] -> ASCII initial: read from the table cache folder
    (:func:`fingerprint.table_files.use_table_cache`) when it holds it, else built (~0.3 s, in every process
    that fingerprints: a crawl's, each worker's) and saved there (0.4 ms to read back)."""
    path = _initial_table_path()
    if path is not None:
        try:
            table: np.ndarray = np.load(path, allow_pickle=False)
            if table.shape == (_MAX_CODE_POINT,) and table.dtype == np.uint8:
                return table
        except (OSError, ValueError):
            pass  # absent or damaged: build it again
    table = _build_initial_table()
    if path is not None:
        save_table_file(path, lambda handle: np.save(handle, table, allow_pickle=False))
    return table


def _initial_table_path() -> Path | None:
    """The table's file: this module's code and pypinyin's version (:func:`table_files.table_cache_file`)."""
    return table_cache_file("pinyin-initials", __file__, ".npy", packages=("pypinyin",))


def _build_initial_table() -> np.ndarray:
    """uint8[code point] -> ASCII initial, from pypinyin's single-character dictionary."""
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


def letter_indices(initials: str, alphabet: str = PINYIN_ALPHABET) -> np.ndarray:
    """Index (int64) of each character of ``initials`` in ``alphabet``, or ``len(alphabet)`` for characters
    outside it (digits, Latin letters no syllable starts with, :data:`UNKNOWN_INITIAL`)."""
    lut = np.full(256, len(alphabet), dtype=np.int64)
    for i, ch in enumerate(alphabet):
        lut[ord(ch)] = i
    indices: np.ndarray = lut[np.frombuffer(initials.encode("ascii", "replace"), dtype=np.uint8)]
    return indices


def initial_counts(initials: str, alphabet: str = PINYIN_ALPHABET) -> np.ndarray:
    """Count of each ``alphabet`` letter in ``initials`` (int64, alphabet order)."""
    idx = letter_indices(initials, alphabet)
    return np.bincount(idx, minlength=len(alphabet) + 1)[: len(alphabet)].astype(np.int64)
