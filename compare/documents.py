"""Everything compare needs to know about one text, computed once (pure).

A :class:`Document` carries the normalised text with its offset map, the pinyin-initial string (same length),
and the fingerprints that are indexed: a 64-bit Simhash (near-whole copies), pinyin DNA codes (homophone and
script changes) and winnowing hashes over the characters and over the pinyin initials (partial copies).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fingerprint.normalize import NormalizedText, normalize
from fingerprint.pinyin_dna import dna_codes, pinyin_initials
from fingerprint.simhash import simhash_text
from fingerprint.winnowing import winnow

__all__ = ["WINNOW_CHARS", "WINNOW_INITIALS", "Document", "analyse"]

# (k, w): winnowing guarantees that any shared run of w + k - 1 characters is found.
WINNOW_CHARS = (8, 16)  # 23 characters
WINNOW_INITIALS = (16, 16)  # 31 pinyin initials


@dataclass(frozen=True, eq=False)
class Document:
    original: str
    normalized: NormalizedText
    initials: str
    simhash: int
    dna: tuple[tuple[int, int], ...]
    winnow_chars: tuple[tuple[int, int], ...]
    winnow_initials: tuple[tuple[int, int], ...]

    @property
    def text(self) -> str:
        """The normalised text."""
        return self.normalized.text

    def index_codes(self) -> dict[str, Sequence[tuple[int, int]]]:
        """(code, position) pairs per indexed kind, as the store keeps them."""
        return {"dna": self.dna, "winnow": self.winnow_chars, "winnow_py": self.winnow_initials}


def analyse(text: str) -> Document:
    normalized = normalize(text)
    initials = pinyin_initials(normalized.text)
    codes = dna_codes(initials)
    return Document(
        original=text,
        normalized=normalized,
        initials=initials,
        simhash=simhash_text(normalized.text),
        dna=tuple((code, position) for position, code in enumerate(codes)),
        winnow_chars=tuple(winnow(normalized.text, *WINNOW_CHARS)),
        winnow_initials=tuple(winnow(initials, *WINNOW_INITIALS)),
    )
