"""The fingerprints of a text: a text in, everything the page path needs of it out, under the contract.

One normalisation (with its offset map back to the original), one pinyin-initial string (one letter per
normalised character), then the fingerprints that ``storage`` indexes: a Simhash for near-whole copies (off in
the product), winnowing hashes over the characters (edited and partial copies) and over the initials
(same-sound swaps). Pages and registered chapters go through the same function, so the writer of the index and
every query agree by construction.

A method the contract leaves out is not computed (its codes are empty); pinyin DNA, MinHash, KSentence and the
weighted Simhash schemes are not part of it (the research shelf and ``fingerprint.contract``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from fptrack.fingerprint.contract import CONTRACT, FingerprintContract
from fptrack.fingerprint.normalize import NormalizedText, normalize
from fptrack.fingerprint.pinyin import pinyin_initials
from fptrack.fingerprint.simhash import simhash_text
from fptrack.fingerprint.winnowing import pairs_of, winnow_array

__all__ = ["TextFingerprints", "fingerprint_text"]

_NO_CODES = np.empty((0, 2), dtype=np.int64)
_NO_CODES.flags.writeable = False


@dataclass(frozen=True, eq=False)
class TextFingerprints:
    """The fingerprints of one text under ``contract``. ``simhash`` is unsigned (``contract.simhash.bits``
    bits; None when Simhash is off, and then nothing stores one); every code is a (hash, position) pair whose
    hash fits a signed 64-bit BIGINT (position = normalised offset of the winnowed k-gram).

    The codes are the arrays the winnowing makes (``chars_codes``, ``initials_codes``: ``(n, 2)`` int64, hash
    then position), computed the first time they are asked for: verifying a page against a registered chapter
    needs only the chapter's normalised text and initials (winnowing it cost ~0.4 ms of its ~0.65). The page
    path reads them as arrays (:meth:`index_arrays`), and the pairs as Python ints (``winnow_chars``,
    ``winnow_initials``, :meth:`index_codes`) are made only when asked for (making them for every page cost
    ~0.35 ms of the compare stage's ~7)."""

    original: str
    normalized: NormalizedText
    initials: str
    simhash: int | None
    contract: FingerprintContract = field(default=CONTRACT, repr=False)

    @property
    def text(self) -> str:
        """The normalised text."""
        return self.normalized.text

    @cached_property
    def code_kinds(self) -> tuple[str, ...]:
        """The code kinds the contract computes: a kind it does not use is not stored (no empty row per
        text)."""
        return self.contract.code_kinds()

    @cached_property
    def chars_codes(self) -> np.ndarray:
        """The winnowing of the normalised characters, as an ``(n, 2)`` array (none if the contract leaves
        it out)."""
        if not self.contract.uses("winnow"):
            return _NO_CODES
        return winnow_array(self.text, self.contract.winnow_chars.k, self.contract.winnow_chars.w)

    @cached_property
    def initials_codes(self) -> np.ndarray:
        """The winnowing of the pinyin initials, as an ``(n, 2)`` array (none if the contract leaves it
        out)."""
        if not self.contract.uses("winnow_py"):
            return _NO_CODES
        return winnow_array(self.initials, self.contract.winnow_initials.k, self.contract.winnow_initials.w)

    @cached_property
    def winnow_chars(self) -> tuple[tuple[int, int], ...]:
        """The winnowing of the characters: ((hash, position), ...)."""
        return pairs_of(self.chars_codes)

    @cached_property
    def winnow_initials(self) -> tuple[tuple[int, int], ...]:
        """The winnowing of the pinyin initials: ((hash, position), ...)."""
        return pairs_of(self.initials_codes)

    def index_arrays(self) -> dict[str, np.ndarray]:
        """The ``(n, 2)`` int64 array of (code, position) per indexed kind the contract computed."""
        arrays = {"winnow": self.chars_codes, "winnow_py": self.initials_codes}
        return {kind: arrays[kind] for kind in self.code_kinds}

    def index_codes(self) -> dict[str, Sequence[tuple[int, int]]]:
        """(code, position) pairs per indexed kind the contract computed, as the store keeps them."""
        codes = {"winnow": self.winnow_chars, "winnow_py": self.winnow_initials}
        return {kind: codes[kind] for kind in self.code_kinds}


def fingerprint_text(text: str, contract: FingerprintContract = CONTRACT) -> TextFingerprints:
    """Normalise ``text`` (original, as crawled or registered) and compute the fingerprints ``contract``
    uses (the winnowing codes when first read)."""
    normalized = normalize(text)
    return TextFingerprints(
        original=text,
        normalized=normalized,
        initials=pinyin_initials(normalized.text),
        simhash=simhash_text(normalized.text, params=contract.simhash) if contract.uses("simhash") else None,
        contract=contract,
    )
