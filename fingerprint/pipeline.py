"""The one fingerprint pipeline: a text in, everything the page path needs of it out, under the contract.

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
from dataclasses import dataclass

from fptrack.fingerprint.contract import CODE_KINDS, CONTRACT, FingerprintContract
from fptrack.fingerprint.normalize import NormalizedText, normalize
from fptrack.fingerprint.pinyin import pinyin_initials
from fptrack.fingerprint.simhash import simhash_text
from fptrack.fingerprint.winnowing import winnow

__all__ = ["TextFingerprints", "fingerprint_text"]


@dataclass(frozen=True, eq=False)
class TextFingerprints:
    """The fingerprints of one text. ``simhash`` is unsigned (``contract.simhash.bits`` bits; None when
    Simhash is off, and then nothing stores one); every code is a (hash, position) pair whose hash fits a
    signed 64-bit BIGINT (position = normalised offset of the winnowed k-gram)."""

    original: str
    normalized: NormalizedText
    initials: str
    simhash: int | None
    winnow_chars: tuple[tuple[int, int], ...]
    winnow_initials: tuple[tuple[int, int], ...]
    # the code kinds the contract computed: a kind it does not use is not stored (no empty row per text)
    code_kinds: tuple[str, ...] = CODE_KINDS

    @property
    def text(self) -> str:
        """The normalised text."""
        return self.normalized.text

    def index_codes(self) -> dict[str, Sequence[tuple[int, int]]]:
        """(code, position) pairs per indexed kind the contract computed, as the store keeps them."""
        codes = {"winnow": self.winnow_chars, "winnow_py": self.winnow_initials}
        return {kind: codes[kind] for kind in self.code_kinds}


def fingerprint_text(text: str, contract: FingerprintContract = CONTRACT) -> TextFingerprints:
    """Normalise ``text`` (original, as crawled or registered) and compute the fingerprints ``contract``
    uses."""
    normalized = normalize(text)
    initials = pinyin_initials(normalized.text)
    uses = contract.uses
    return TextFingerprints(
        original=text,
        normalized=normalized,
        initials=initials,
        simhash=simhash_text(normalized.text, params=contract.simhash) if uses("simhash") else None,
        winnow_chars=(
            winnow(normalized.text, contract.winnow_chars.k, contract.winnow_chars.w)
            if uses("winnow")
            else ()
        ),
        winnow_initials=(
            winnow(initials, contract.winnow_initials.k, contract.winnow_initials.w)
            if uses("winnow_py")
            else ()
        ),
        code_kinds=contract.code_kinds(),
    )
